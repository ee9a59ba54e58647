package spool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/store"
)

// Recomposed holds one archive written into it without its streams' data:
// a restore to a moment writes the moment's archive here once, checked as
// it is written, and reads each stream's data for the server by composing
// it again (compose), from the same base and segments. Nothing of the
// moment is written to a disk, and nothing held is as large as its data.
//
// What it keeps of the archive is every byte outside its data entries (tar
// headers, each stream's backup.json, the manifest) and the first and last
// keptEdge bytes of each data entry (Open's scan of the tar reads the
// bytes around each header); a data entry is told by the writer's Hold of
// its tar header (busarchive.Writer holds each data entry's header, and
// only that, until the entry's size is patched in), and runs from the end
// of the held header to the Release. ReadAt reads what was kept and fails
// on anything else; Reader of a data entry, from its first byte, composes
// it again: the n-th entry written is the n-th compose is asked for. A
// reader of the archive checks what it reads (the manifest's SHA-256, or
// the CRC-32C noted as it was written), so a composition that differs
// fails its read.
//
// It keeps one object, and only what a restore reads of it: List, Stat,
// Delete and Sweep do nothing of use, and it is not a backend.
type Recomposed struct {
	compose func(ctx context.Context, entry int, w io.Writer) error

	mu     sync.Mutex
	obj    *recomposedObject
	closed bool
}

// composeBuffer is how much of a composition is handed to its reader at
// a time: small writes gathered (tar headers, re-encoded chunks, the
// segments' messages); a base's chunk, a megabyte, goes through in one or
// two. A quarter of a megabyte, since under the keeper's soft memory limit
// every megabyte held while a restore runs is garbage collected for.
const composeBuffer = 256 << 10

// keptEdge is how much of each end of a data entry is kept: Open's scan
// reads ahead of a header by up to 64 KiB (busarchive's scanMaxBlock).
const keptEdge = 64 << 10

// MaxRecomposedKept bounds what one archive keeps outside its data: a
// manifest, backup.json files and headers, well under it.
const MaxRecomposedKept = 64 << 20

// errNotKept is a read of bytes of a data entry that were not kept and
// that only a read of the whole entry composes again.
var errNotKept = errors.New("the bytes asked for are in a stream's data, which is composed again only when read from its first byte")

// NewRecomposed is an empty store whose data entries compose composes
// again: entry is the number of the data entry (0: the first written), w
// what it writes into, and its error fails the read.
func NewRecomposed(compose func(ctx context.Context, entry int, w io.Writer) error) *Recomposed {
	return &Recomposed{compose: compose}
}

// DataEntries is how many data entries the committed object holds.
func (s *Recomposed) DataEntries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.obj == nil {
		return 0
	}
	return len(s.obj.runs)
}

// Create begins the store's object at key.
func (s *Recomposed) Create(_ context.Context, key string) (store.Writer, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the store of a composed archive is closed")
	}
	return &recomposedWriter{WriteGuard: store.WriteGuard{Key: key}, s: s}, nil
}

// Open opens the committed object at key.
func (s *Recomposed) Open(_ context.Context, key string) (store.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.obj == nil || s.obj.info.Key != key {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	return s.obj, nil
}

// Stat describes the committed object at key.
func (s *Recomposed) Stat(ctx context.Context, key string) (store.Info, error) {
	o, err := s.Open(ctx, key)
	if err != nil {
		return store.Info{}, err
	}
	return o.Info(), nil
}

// List lists the committed object when its key begins with prefix.
func (s *Recomposed) List(_ context.Context, prefix string) ([]store.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.obj == nil || len(s.obj.info.Key) < len(prefix) || s.obj.info.Key[:len(prefix)] != prefix {
		return nil, nil
	}
	return []store.Info{s.obj.info}, nil
}

// Delete forgets the object at key.
func (s *Recomposed) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.obj != nil && s.obj.info.Key == key {
		s.obj = nil
	}
	return nil
}

// Sweep: nothing is ever left over.
func (s *Recomposed) Sweep(context.Context, time.Duration) error { return nil }

// Describe says what it is.
func (s *Recomposed) Describe() store.Description {
	return store.Description{Kind: "composed", URL: "composed:",
		Publish: "one archive, kept in memory but for its streams' data; nothing is durable",
		Ranges:  "the kept bytes; a stream's data whole, from its first byte, composed again", Listing: "its one object"}
}

// Close forgets the object; safe twice.
func (s *Recomposed) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obj, s.closed = nil, true
	return nil
}

// kept is bytes of the object kept as written, at off.
type kept struct {
	off int64
	b   []byte
}

// run is a data entry: n bytes at off (its data and the tar padding after it).
type run struct{ off, n int64 }

// recomposedWriter is the writer of the store's object.
type recomposedWriter struct {
	store.WriteGuard
	s *Recomposed

	size     int64
	kept     []kept
	keptSize int64
	runs     []run
	held     bool
	holdOff  int64
	holdEnd  int64
	tail     []byte // the last bytes of the data entry being written, past its first keptEdge
}

func (w *recomposedWriter) Write(p []byte) (int, error) {
	if err := w.Usable(); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		if !w.held || w.size < w.holdEnd {
			take := len(p)
			if w.held {
				take = int(min(int64(take), w.holdEnd-w.size))
			}
			if err := w.keep(p[:take]); err != nil {
				return 0, w.Fail(err)
			}
			p = p[take:]
			continue
		}
		// In a data entry: its first keptEdge bytes kept, the rest only
		// as its tail until Release.
		if into := w.size - w.holdEnd; into < keptEdge {
			take := int(min(int64(len(p)), keptEdge-into))
			if err := w.keep(p[:take]); err != nil {
				return 0, w.Fail(err)
			}
			p = p[take:]
			continue
		}
		// The tail never grows past three edges, however large a write
		// (a base's chunk is a megabyte).
		if len(p) >= keptEdge {
			w.tail = append(w.tail[:0], p[len(p)-keptEdge:]...)
		} else {
			w.tail = append(w.tail, p...)
			if len(w.tail) > 2*keptEdge {
				w.tail = append(w.tail[:0], w.tail[len(w.tail)-keptEdge:]...)
			}
		}
		w.size += int64(len(p))
		p = nil
	}
	return n, nil
}

// keep appends p, the bytes at w.size, to what is kept.
func (w *recomposedWriter) keep(p []byte) error {
	if w.keptSize+int64(len(p)) > MaxRecomposedKept {
		return fmt.Errorf("the composed archive's bytes outside its streams' data are over %d, so it was not composed", MaxRecomposedKept)
	}
	if k := len(w.kept) - 1; k >= 0 && w.kept[k].off+int64(len(w.kept[k].b)) == w.size {
		w.kept[k].b = append(w.kept[k].b, p...)
	} else {
		w.kept = append(w.kept, kept{off: w.size, b: bytes.Clone(p)})
	}
	w.size += int64(len(p))
	w.keptSize += int64(len(p))
	return nil
}

func (w *recomposedWriter) WriteAt(p []byte, off int64) (int, error) {
	if err := w.Usable(); err != nil {
		return 0, err
	}
	if !w.held || off < w.holdOff || off+int64(len(p)) > w.holdEnd {
		return 0, w.Fail(fmt.Errorf("a write at %d of %d bytes outside the held header", off, len(p)))
	}
	if n, err := readKept(w.kept, p, off, true); err != nil || n != len(p) {
		return 0, w.Fail(fmt.Errorf("the held header at %d was not kept: %v", off, err))
	}
	return len(p), nil
}

func (w *recomposedWriter) Hold(off, n int64) {
	if w.held || off < w.size || n <= 0 {
		w.Fail(fmt.Errorf("a hold of %d bytes at %d, at %d bytes written, is not a data entry's header", n, off, w.size))
		return
	}
	w.held, w.holdOff, w.holdEnd, w.tail = true, off, off+n, w.tail[:0]
}

func (w *recomposedWriter) Release() {
	if !w.held {
		return
	}
	w.held = false
	if w.size <= w.holdEnd {
		return // the header only
	}
	start := w.holdEnd
	w.runs = append(w.runs, run{off: start, n: w.size - start})
	if len(w.tail) > 0 {
		keep := min(int64(len(w.tail)), int64(keptEdge), w.size-start-keptEdge)
		if keep > 0 {
			w.kept = append(w.kept, kept{off: w.size - keep, b: bytes.Clone(w.tail[int64(len(w.tail))-keep:])})
			w.keptSize += keep
		}
	}
	w.tail = nil
}

func (w *recomposedWriter) Commit(context.Context) (store.Info, error) {
	if err := w.Usable(); err != nil {
		return store.Info{}, err
	}
	if w.held {
		return store.Info{}, w.Fail(errors.New("a data entry's header is still held"))
	}
	w.Committed = true
	o := &recomposedObject{s: w.s, info: store.Info{Key: w.Key, Size: w.size, Modified: time.Now()}, kept: w.kept, runs: w.runs}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.closed {
		return store.Info{}, errors.New("the store of a composed archive is closed")
	}
	w.s.obj = o
	return o.info, nil
}

func (w *recomposedWriter) Abort() {
	if !w.Committed {
		w.Aborted = true
		w.kept, w.tail = nil, nil
	}
}

// recomposedObject is the committed object: immutable, safe for
// concurrent reads.
type recomposedObject struct {
	s    *Recomposed
	info store.Info
	kept []kept
	runs []run
}

func (o *recomposedObject) Size() int64      { return o.info.Size }
func (o *recomposedObject) Info() store.Info { return o.info }
func (o *recomposedObject) Close() error     { return nil }

func (o *recomposedObject) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= o.info.Size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), o.info.Size-off)
	n, err := readKept(o.kept, p[:want], off, false)
	if err != nil {
		return n, err
	}
	if int64(len(p)) > want {
		return n, io.EOF
	}
	return n, nil
}

// readKept copies the kept bytes at off into p (or, when write, p into
// them), as far as they are kept without a gap.
func readKept(ks []kept, p []byte, off int64, write bool) (int, error) {
	n := 0
	for len(p) > 0 {
		i := sort.Search(len(ks), func(i int) bool { return ks[i].off+int64(len(ks[i].b)) > off })
		if i == len(ks) || ks[i].off > off {
			return n, fmt.Errorf("%w (byte %d)", errNotKept, off)
		}
		b := ks[i].b[off-ks[i].off:]
		var k int
		if write {
			k = copy(b, p)
		} else {
			k = copy(p, b)
		}
		p, off, n = p[k:], off+int64(k), n+k
	}
	return n, nil
}

// Reader reads n bytes at off: kept bytes as they were written, or a data
// entry from its first byte, composed again.
func (o *recomposedObject) Reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > o.info.Size {
		return nil, fmt.Errorf("bytes %d to %d are outside the object's %d", off, off+n, o.info.Size)
	}
	for i, r := range o.runs {
		if r.off == off && n <= r.n {
			return o.composed(ctx, i, n), nil
		}
	}
	b := make([]byte, n)
	if _, err := readKept(o.kept, b, off, false); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// composed is data entry i composed again, read up to n bytes: its reader
// says EOF only once the composition ended without error and wrote exactly
// n bytes.
func (o *recomposedObject) composed(ctx context.Context, i int, n int64) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Buffered: the composer writes chunk by chunk (a base's s2 chunks
		// one Write each), and each Write into the pipe is a handoff to
		// the reader; what is gathered at a time costs the reader's
		// goroutine far fewer switches.
		bw := bufio.NewWriterSize(pw, composeBuffer)
		err := o.s.compose(ctx, i, bw)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	return &composedReader{pr: pr, left: n, cancel: cancel, done: done}
}

// composedReader reads a composition from its pipe.
type composedReader struct {
	pr     *io.PipeReader
	left   int64
	cancel context.CancelFunc
	done   chan struct{}
	ended  error // end's answer, once asked
	closed bool
}

func (r *composedReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, r.end()
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.pr.Read(p)
	r.left -= int64(n)
	switch {
	case err == io.EOF:
		return n, fmt.Errorf("the stream's data composed again ended %d bytes short of what was composed first: %w", r.left, io.ErrUnexpectedEOF)
	case err != nil:
		return n, fmt.Errorf("composing the stream's data again: %w", err)
	case r.left == 0:
		// The last bytes go out with the composition's end: a reader that
		// stops at the size it asked for must still learn of a failure.
		if err := r.end(); err != io.EOF {
			return n, err
		}
	}
	return n, nil
}

// end waits for the composition to end once every byte was read: io.EOF
// when it ended well, having written nothing more.
func (r *composedReader) end() error {
	if r.ended != nil {
		return r.ended
	}
	var one [1]byte
	m, err := r.pr.Read(one[:])
	switch {
	case m > 0:
		r.ended = errors.New("the stream's data composed again is longer than what was composed first")
	case err == io.EOF:
		r.ended = io.EOF
	default:
		r.ended = fmt.Errorf("composing the stream's data again: %w", err)
	}
	return r.ended
}

func (r *composedReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.cancel()
	r.pr.CloseWithError(errors.New("the reader of the composed data was closed"))
	<-r.done
	return nil
}
