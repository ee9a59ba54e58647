package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nats-keeper/nats-keeper/store"
)

// Scratch is a store of a few objects that live only while it is open: a
// restore to a moment composes its archive here, in the keeper's private
// spool directory, reads it for the server, and forgets it. Each object is
// a file unlinked as soon as it is made (0600), written through the page
// cache and never synced: nothing of it is durable, nothing is left after
// a crash, and its bytes need never reach the disk (the file is closed,
// and its pages dropped, once the restore ends). What must outlive a crash
// is recorded elsewhere (the restore's journal names what to compose
// again).
//
// Its writer is every part-storing backend's (store.NewPartWriter), so an
// object is hashed as any store's is (Info.Sum). It is safe for concurrent
// use; each Writer is used from one goroutine.
type Scratch struct {
	dir string

	mu      sync.Mutex
	objects map[string]*scratchFile // committed, by key
	closed  bool
}

// scratchName is the prefix of a scratch file's name (for the moment it
// lives before it is unlinked).
const scratchName = fileName + "scratch-"

// NewScratch is an empty scratch store in dir, the keeper's spool
// directory (OpenDir made it).
func NewScratch(dir string) *Scratch {
	return &Scratch{dir: dir, objects: map[string]*scratchFile{}}
}

// Create begins an object at key: an unlinked file of its own, written
// through store.NewPartWriter (its parts at their offsets, hashed as every
// store's are).
func (s *Scratch) Create(ctx context.Context, key string) (store.Writer, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("the scratch store is closed")
	}
	f, err := os.CreateTemp(s.dir, scratchName)
	if err != nil {
		return nil, fmt.Errorf("making a scratch file in %s: %w", s.dir, err)
	}
	// Gone already is as good: a keeper starting on the same directory
	// removes what it finds there (OpenDir).
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.Close()
		return nil, fmt.Errorf("unlinking the scratch file %s: %w", f.Name(), err)
	}
	return store.NewPartWriter(ctx, key, &scratchSink{s: s, key: key, f: f}), nil
}

// Open opens the committed object at key: a descriptor of its own onto
// the object's file (dup), so that it reads the bytes it opened even once
// the object is replaced, deleted or the store closed. Close it.
func (s *Scratch) Open(_ context.Context, key string) (store.Object, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[key]
	if o == nil {
		return nil, fmt.Errorf("%s: %w", key, store.ErrNotFound)
	}
	fd, err := unix.FcntlInt(o.f.Fd(), unix.F_DUPFD_CLOEXEC, 0) // not inherited by a child process
	if err != nil {
		return nil, fmt.Errorf("opening the scratch object %s: %w", key, err)
	}
	return &scratchObject{f: os.NewFile(uintptr(fd), o.f.Name()), info: o.info}, nil
}

// Stat describes the committed object at key.
func (s *Scratch) Stat(_ context.Context, key string) (store.Info, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[key]
	if o == nil {
		return store.Info{}, fmt.Errorf("%s: %w", key, store.ErrNotFound)
	}
	return o.info, nil
}

// List describes the committed objects whose key begins with prefix.
func (s *Scratch) List(ctx context.Context, prefix string) ([]store.Info, error) {
	s.mu.Lock()
	var keys []string
	for k := range s.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	infos := make([]store.Info, 0, len(keys))
	for _, k := range keys {
		if i, err := s.Stat(ctx, k); err == nil {
			infos = append(infos, i)
		}
	}
	slices.SortFunc(infos, func(a, b store.Info) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

// Delete forgets the object at key and drops its bytes (once no object
// opened on it is left open).
func (s *Scratch) Delete(_ context.Context, key string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	o := s.objects[key]
	delete(s.objects, key)
	s.mu.Unlock()
	if o != nil {
		return o.f.Close()
	}
	return nil
}

// Sweep has nothing to do: an uncommitted object is an unlinked file its
// writer closes.
func (s *Scratch) Sweep(context.Context, time.Duration) error { return nil }

// Describe says what the store is.
func (s *Scratch) Describe() store.Description {
	return store.Description{URL: "file://" + s.dir + "#scratch", Kind: "file",
		Publish: "Commit keeps the unlinked file open under its key; nothing is synced or left after the store is closed",
		Ranges:  "ReadAt of the file", Listing: "what is committed and not deleted"}
}

// Close drops every object; it is safe twice.
func (s *Scratch) Close() error {
	s.mu.Lock()
	objects := s.objects
	s.objects, s.closed = map[string]*scratchFile{}, true
	s.mu.Unlock()
	var first error
	for _, o := range objects {
		if err := o.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// scratchSink writes an object's parts into its unlinked file. It is a
// store.PartReader: a part the archive's writer holds (a data entry's
// header, until the entry's size is known) goes to the file at once and is
// read back to be patched, instead of staying in memory for the whole
// entry.
type scratchSink struct {
	s   *Scratch
	key string
	f   *os.File
}

func (k *scratchSink) Part(_ context.Context, n int, data store.Blocks, _ [32]byte) error {
	off := int64(n-1) * store.PartSize
	for _, b := range data {
		if _, err := k.f.WriteAt(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}

func (k *scratchSink) KeepPart(ctx context.Context, n int, data store.Blocks, sum [32]byte) error {
	return k.Part(ctx, n, data, sum)
}

func (k *scratchSink) ReadPart(_ context.Context, n int, into store.Blocks) error {
	return into.Fill(io.NewSectionReader(k.f, int64(n-1)*store.PartSize, int64(into.Len())))
}

func (k *scratchSink) Complete(ctx context.Context, _ int, size int64, sum string) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		k.f.Close()
		return store.Info{}, err
	}
	if err := k.f.Truncate(size); err != nil { // an object smaller than before (none here: the file is new)
		k.f.Close()
		return store.Info{}, err
	}
	k.s.mu.Lock()
	if k.s.closed {
		k.s.mu.Unlock()
		k.f.Close()
		return store.Info{}, errors.New("the scratch store is closed")
	}
	info := store.Info{Key: k.key, Size: size, Sum: sum, Modified: time.Now()}
	old := k.s.objects[k.key]
	k.s.objects[k.key] = &scratchFile{f: k.f, info: info}
	k.s.mu.Unlock()
	if old != nil {
		old.f.Close()
	}
	return info, nil
}

func (k *scratchSink) Abort(context.Context) { k.f.Close() }

// scratchFile is a committed object: its file and what describes it.
type scratchFile struct {
	f    *os.File
	info store.Info
}

type scratchObject struct {
	f    *os.File
	info store.Info
}

func (o *scratchObject) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }
func (o *scratchObject) Size() int64                             { return o.info.Size }
func (o *scratchObject) Info() store.Info                        { return o.info }

// Reader reads n bytes at off.
func (o *scratchObject) Reader(_ context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > o.info.Size {
		return nil, fmt.Errorf("a read of %d bytes at %d past the object's %d", n, off, o.info.Size)
	}
	return io.NopCloser(io.NewSectionReader(o.f, off, n)), nil
}

// Close closes the object's own descriptor.
func (o *scratchObject) Close() error { return o.f.Close() }
