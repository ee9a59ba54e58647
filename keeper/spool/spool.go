// Package spool holds a stream's snapshot on its way into an archive while
// the archive is busy with another stream's: in memory, from a budget that
// every spool of a keeper shares, then in an unlinked file of the keeper's
// private spool directory. It owns that budget, the spool directory's
// hygiene (OpenDir) and the order in which the bytes come back out. It also
// holds a restore to a moment's archive between its two compositions
// (Recomposed), in memory, all of it but its streams' data.
//
// It imports the standard library, busarchive (for the bound
// of a stream's backup.json) and the store's interface (Recomposed) only;
// the keeper engine imports it, never the other way round.
package spool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// A snapshot of several streams takes them at once, but bus.tar is written
// in one pass, one stream's entries after the other's. So every stream but
// the one being written into the archive is spooled: its snapshot goes
// into a spool as fast as the server sends it, and the archive drains the
// spool when the stream's turn comes (the stream at the head is drained as
// it arrives). A spool holds bytes in memory, in chunks taken from one
// budget that the whole keeper shares (Memory, whatever the number of
// snapshots at once), and, when that is spent, in a file of its own in the
// keeper's private directory (Config.SpoolDir), 0600, unlinked as soon as it
// is made, so that nothing is left of it after a crash. The format of
// bus.tar does not change: the bytes that reach the archive are the same,
// hashed by the archive's writer as before.
//
// Once the archive reads a spool (its stream's turn came), a write that
// finds the spool's memory full, or its file holding bytes not yet read
// (what the stream spooled before its turn), first waits, up to
// HeadPatience, for the reader to make room and to read the file to its
// end: a store slower than the server then slows the server through its
// window, instead of every byte going through the file and back. A write
// whose patience ran out while the reader kept reading goes to the file,
// and the next write waits again, so a backlog is drained, not fed at the
// server's pace for the rest of the stream. A store that stalls (no byte
// read for the whole patience: an R3 bucket electing a leader) gets the
// file: the write that waited goes there, and so does every write after it
// until the reader has read the file to its end, at the server's pace, so a
// stall costs one wait, not one a chunk (the server fails a snapshot whose
// chunks go unacknowledged for 5 s).
//
// One chunk of the budget is kept for the spools at the head: the others
// share the rest, so that a stream waiting for its turn never takes the
// memory the stream being written needs. Chunks are reused, not made anew
// for every megabyte.

// Spool bounds: the memory every spool of a keeper shares (Memory), in
// chunks (Chunk).
const (
	Chunk  = 1 << 20
	Memory = 2 << 20
	// HeadPatience is the longest a write to the spool being read waits
	// for room in memory before it goes to the file.
	HeadPatience = time.Second
)

// Budget is the keeper-wide memory of spools: a token per chunk held,
// and a token of shared per chunk held by a spool not at the head (one
// fewer than tokens, so a chunk is always left for a head). The chunks
// given back wait in free for the next take.
type Budget struct {
	chunk    int           // bytes of one chunk
	patience time.Duration // of a write at the head (HeadPatience)
	tokens   chan struct{}
	shared   chan struct{}
	free     chan []byte
}

// NewBudget is a budget of bytes in chunks of chunk bytes (at least one);
// a write at the head waits up to patience for its reader (HeadPatience;
// 0 spills at once, as tests with small data want).
func NewBudget(bytes, chunk int, patience time.Duration) *Budget {
	n := max(bytes/chunk, 1)
	return &Budget{chunk: chunk, patience: patience, tokens: make(chan struct{}, n),
		shared: make(chan struct{}, max(n-1, 1)), free: make(chan []byte, n)}
}

// take takes a chunk, empty, if the budget has one free for a spool at the
// head (head) or waiting for its turn; it never waits. shared says that the
// chunk counts against the spools not at the head.
func (b *Budget) take(head bool) (c []byte, shared, ok bool) {
	if !head {
		select {
		case b.shared <- struct{}{}:
		default:
			return nil, false, false
		}
	}
	select {
	case b.tokens <- struct{}{}:
	default:
		if !head {
			<-b.shared
		}
		return nil, false, false
	}
	select {
	case c = <-b.free:
		c = c[:0]
	default:
		c = make([]byte, 0, b.chunk)
	}
	return c, !head, true
}

// give takes back a chunk that take gave with shared.
func (b *Budget) give(c []byte, shared bool) {
	select {
	case b.free <- c:
	default:
	}
	if shared {
		<-b.shared
	}
	<-b.tokens
}

// fileName is the prefix of a spool file's name in the spool directory.
const fileName = "snapshot-"

// OpenDir makes the keeper's spool directory dir (0700) if it is
// missing, refuses one that is not a directory of its own (a symlink, say),
// and removes what a keeper that stopped left in it.
func OpenDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("making the spool directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("looking at the spool directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the spool directory %s is not a directory (a symlink is not followed)", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("making the spool directory %s private: %w", dir, err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading the spool directory %s: %w", dir, err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fileName) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("removing a leftover spool file: %w", err)
			}
		}
	}
	return nil
}

// Spool is one stream's snapshot on its way into the archive: written by
// the bus (Data, Meta), read by the archive's writer (Read, MetaBytes). A
// write never waits for the reader, so the server's flow control sees a
// keeper that keeps up. The writer and the reader are one goroutine each.
type Spool struct {
	budget   *Budget
	dir      string
	patience time.Duration // HeadPatience (tests shorten it)
	room     chan struct{} // a token when the reader made room (or Close)

	mu     sync.Mutex
	wake   *sync.Cond
	mem    [][]byte // chunks not yet read, in order; the last may be filling
	memOff int      // read offset in mem[0]
	file   *os.File // made once memory is spent; bytes go to it while it holds unread ones

	fileW    int64     // bytes written to file
	fileR    int64     // bytes of file read
	closed   bool      // the data's writer closed it: no more bytes come
	broken   error     // the reader gave up (or a write failed): writes fail
	head     bool      // the archive reads it: writes wait for room (patience)
	shared   int       // chunks of mem that count against the spools not at the head
	lastRead time.Time // when the reader last took bytes
	spill    bool      // the reader stalled: writes go to the file, unwaited, until it read the file to its end
	gaveUp   int       // writes that waited the whole patience, then went to the file
	meta     bytes.Buffer
}

// New is a spool of budget b whose file, once memory is spent, is made in
// dir (opened with OpenDir).
func New(b *Budget, dir string) *Spool {
	s := &Spool{budget: b, dir: dir, patience: b.patience, room: make(chan struct{}, 1)}
	s.wake = sync.NewCond(&s.mu)
	return s
}

// Data is the writer of the stream's stream.arc.s2.
func (s *Spool) Data() io.WriteCloser { return dataWriter{s} }

// Meta is the writer of the stream's backup.json, held in memory (bounded
// as the archive bounds it).
func (s *Spool) Meta() io.WriteCloser { return metaWriter{s} }

type dataWriter struct{ s *Spool }

func (d dataWriter) Write(p []byte) (int, error) { return d.s.write(p) }

func (d dataWriter) Close() error {
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	d.s.closed = true
	d.s.wake.Broadcast()
	return nil
}

type metaWriter struct{ s *Spool }

func (m metaWriter) Write(p []byte) (int, error) {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p) > busarchive.MaxMetaSize-s.meta.Len() {
		return 0, fmt.Errorf("backup.json is over %d bytes, so it was not kept", busarchive.MaxMetaSize)
	}
	return s.meta.Write(p)
}

func (metaWriter) Close() error { return nil }

func (s *Spool) write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	var until time.Time // when a write at the head stops waiting for room
	for len(p) > 0 {
		if s.broken != nil {
			return n, s.broken
		}
		if k := s.toMem(p); k > 0 {
			p, n = p[k:], n+k
			s.wake.Broadcast()
			continue
		}
		// Memory is spent, or the file holds bytes not yet read (which
		// come first): at the head, wait for the reader.
		if s.head && !s.spill && (len(s.mem) > 0 || s.fileR < s.fileW) {
			if until.IsZero() {
				until = time.Now().Add(s.patience)
			}
			if left := time.Until(until); left > 0 {
				s.mu.Unlock()
				t := time.NewTimer(left)
				select {
				case <-s.room:
				case <-t.C:
				}
				t.Stop()
				s.mu.Lock()
				continue
			}
			s.gaveUp++
			// Stalled, not only slow: nothing read for half the patience.
			s.spill = time.Since(s.lastRead) >= s.patience/2
		}
		if err := s.toFile(p); err != nil {
			s.broken = err
			return n, err
		}
		p, n = nil, n+len(p)
	}
	s.wake.Broadcast()
	return n, nil
}

// toMem puts what of p fits into memory and returns how much: none while
// the file holds bytes not yet read (every byte in memory is older than
// every unread byte of the file, so a spool that went to its file comes
// back to memory once its reader caught up), or when the budget is spent.
// Call with s.mu held.
func (s *Spool) toMem(p []byte) int {
	n := 0
	for len(p) > 0 && s.fileR == s.fileW {
		last := len(s.mem) - 1
		if last < 0 || len(s.mem[last]) == cap(s.mem[last]) {
			c, shared, ok := s.budget.take(s.head)
			if !ok {
				break
			}
			if shared {
				s.shared++
			}
			s.mem = append(s.mem, c)
			last++
		}
		c := s.mem[last]
		k := min(len(p), cap(c)-len(c))
		s.mem[last] = append(c, p[:k]...)
		p, n = p[k:], n+k
	}
	return n
}

// madeRoom tells a write waiting at the head that the reader took bytes.
func (s *Spool) madeRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// toFile appends p to the spool's file, made at the first call. Call with
// s.mu held: only the writer writes, and the reader reads only below fileW.
func (s *Spool) toFile(p []byte) error {
	if s.file == nil {
		f, err := os.CreateTemp(s.dir, fileName+"*")
		if err != nil {
			return fmt.Errorf("spooling the snapshot: %w", err)
		}
		// Unlinked at once: the file lives while it is open, and a crash
		// leaves nothing of it.
		if err := os.Remove(f.Name()); err != nil && !errors.Is(err, syscall.ENOENT) {
			f.Close()
			return fmt.Errorf("spooling the snapshot: %w", err)
		}
		s.file = f
	}
	k, err := s.file.WriteAt(p, s.fileW)
	s.fileW += int64(k)
	if err != nil {
		return fmt.Errorf("spooling the snapshot to %s: %w", s.dir, err)
	}
	return nil
}

// Read gives the spooled bytes in order, waiting for more while the
// writer has not closed; io.EOF once it closed and all was read.
func (s *Spool) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head = true
	for {
		if s.broken != nil {
			return 0, s.broken
		}
		if len(s.mem) > 0 {
			c := s.mem[0]
			if s.memOff < len(c) {
				k := copy(p, c[s.memOff:])
				s.memOff += k
				s.lastRead = time.Now()
				s.dropRead()
				return k, nil
			}
			if s.dropRead() {
				continue
			}
		}
		if s.file != nil && s.fileR < s.fileW {
			// Read outside the lock: the writer only appends past fileW.
			f, off, n := s.file, s.fileR, min(int64(len(p)), s.fileW-s.fileR)
			s.mu.Unlock()
			k, err := f.ReadAt(p[:n], off)
			s.mu.Lock()
			s.fileR += int64(k)
			s.lastRead = time.Now()
			if s.fileR == s.fileW {
				s.spill = false
			}
			s.madeRoom()
			if err != nil && !(errors.Is(err, io.EOF) && k > 0) {
				return k, fmt.Errorf("reading the snapshot's spool back: %w", err)
			}
			return k, nil
		}
		if s.closed && len(s.mem) == 0 {
			return 0, io.EOF
		}
		s.wake.Wait()
	}
}

// dropRead gives back the first chunk once it is read to its end and no
// byte will be added to it (it is full, a later chunk or the file follows,
// or the writer closed), and says whether it did. Call with s.mu held.
func (s *Spool) dropRead() bool {
	c := s.mem[0]
	if s.memOff < len(c) || !(len(c) == cap(c) || len(s.mem) > 1 || s.file != nil || s.closed) {
		return false
	}
	s.giveChunk(c)
	s.mem[0] = nil
	s.mem, s.memOff = s.mem[1:], 0
	s.madeRoom()
	return true
}

// giveChunk gives a chunk of mem back to the budget. Call with s.mu held.
func (s *Spool) giveChunk(c []byte) {
	shared := s.shared > 0
	if shared {
		s.shared--
	}
	s.budget.give(c, shared)
}

// Spooled is how many bytes went to the spool's file.
func (s *Spool) Spooled() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fileW
}

// MetaBytes is backup.json as the bus wrote it.
func (s *Spool) MetaBytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.meta.Bytes())
}

// Close gives back the spool's memory and file, and makes the writer's
// later writes fail. It is safe twice.
func (s *Spool) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken == nil {
		s.broken = errors.New("the snapshot's spool was closed, so the bytes were not kept")
	}
	for _, c := range s.mem {
		s.giveChunk(c)
	}
	s.mem, s.memOff = nil, 0
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	s.wake.Broadcast()
	s.madeRoom()
}
