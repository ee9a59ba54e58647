package busarchive

import (
	"context"
	"errors"
	"hash"
	"io"
	"sync/atomic"

	"github.com/nats-keeper/nats-keeper/internal/lowprio"
)

// verifyBlocks is how many blocks of verifyBlock bytes one verification
// holds: being read, being hashed, and waiting for or being read by the
// decoder.
const verifyBlocks = 3

// errTeeStopped is what the decoder reads when reading the entry stopped
// early (the caller reports why, from wait).
var errTeeStopped = errors.New("the read of the entry stopped")

// blockSource reads an entry's bytes into blocks, front to back.
type blockSource interface {
	// fill reads the next bytes into buf and returns the slice of buf that
	// holds the entry's bytes, with io.EOF when the entry ends there.
	fill(buf []byte) ([]byte, error)
	close()
	// newBlock makes one of the blocks it fills.
	newBlock() []byte
}

// hashTee reads an entry once, front to back, in a goroutine of its own, for
// a goroutine that does nothing but hash every block (SHA-256 is the slowest
// consumer and sets the pace) and one or more other consumers, each reading
// every block through a teeSide: the decoder, and for a checked restore the
// upload. A block goes back to the pool when every consumer is done with it,
// so memory is bounded by verifyBlocks blocks.
type hashTee struct {
	toHash chan *teeBlock // blocks read, in order, for the hasher
	sides  []*teeSide     // the same blocks, for each other consumer
	free   chan *teeBlock
	hashed chan struct{} // closed when the hasher is done

	// Set by the reader before it closes toHash and every side.
	err error // why reading stopped early, nil at the end of the entry
	// Set by the hasher before it closes hashed.
	n int64
}

type teeBlock struct {
	buf  []byte // the whole buffer
	data []byte // the entry's bytes in it
	refs atomic.Int32
}

// teeSide is one consumer's view of the blocks: an io.Reader, or whole blocks
// through next. One goroutine uses it.
type teeSide struct {
	t      *hashTee
	ch     chan *teeBlock
	cur    []byte    // what the consumer has not read of its block
	held   *teeBlock // the consumer's block
	failed bool      // Read returned errTeeStopped
}

// startHashTee starts reading src and hashing it into h, with sides other
// consumers, in verifyBlocks blocks that src makes.
func startHashTee(ctx context.Context, src blockSource, h hash.Hash, sides int) *hashTee {
	t := &hashTee{
		toHash: make(chan *teeBlock, verifyBlocks),
		free:   make(chan *teeBlock, verifyBlocks), hashed: make(chan struct{}),
	}
	for range sides {
		t.sides = append(t.sides, &teeSide{t: t, ch: make(chan *teeBlock, verifyBlocks)})
	}
	for range verifyBlocks {
		t.free <- &teeBlock{buf: src.newBlock()}
	}
	go t.read(ctx, src)
	// The hashing runs at a lower priority: during a restore the server
	// restores a stream on one core and its writes and the keeper's reads
	// share the other, so CPU the hashing takes is taken from the server;
	// lowered, the kernel runs it when a core is otherwise idle (1 GiB
	// restore: 0.79× → 0.75× of the nats CLI's time). It cannot starve: the
	// hashing must keep up before a restore's end is sent.
	lowprio.Go(func() {
		defer close(t.hashed)
		for b := range t.toHash {
			h.Write(b.data)
			t.n += int64(len(b.data))
			t.release(b)
		}
	})
	return t
}

// read fills free blocks from src and hands each to every consumer. The
// sends never block: there are as many places in each channel as blocks.
// (One read at a time: two direct reads at once were slower here, taking CPU
// from the hasher and the decoder.)
func (t *hashTee) read(ctx context.Context, src blockSource) {
	defer func() {
		src.close()
		close(t.toHash)
		for _, s := range t.sides {
			close(s.ch)
		}
	}()
	for {
		var b *teeBlock
		select {
		case b = <-t.free:
		case <-ctx.Done():
			t.err = ctx.Err()
			return
		}
		data, err := src.fill(b.buf)
		if len(data) > 0 {
			b.data = data
			b.refs.Store(int32(1 + len(t.sides)))
			t.toHash <- b
			for _, s := range t.sides {
				s.ch <- b
			}
		} else {
			t.free <- b
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.err = err
			return
		}
	}
}

func (t *hashTee) release(b *teeBlock) {
	if b.refs.Add(-1) == 0 {
		t.free <- b
	}
}

// Read hands out the entry's bytes in order.
func (s *teeSide) Read(p []byte) (int, error) {
	for len(s.cur) == 0 {
		b, ok := s.next()
		if !ok {
			if s.t.err != nil {
				s.failed = true
				return 0, errTeeStopped
			}
			return 0, io.EOF
		}
		s.held, s.cur = b, b.data
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

// next gives back the consumer's block, if it holds one, and takes the next
// whole block; false when none is left (t.err then says whether the entry
// ended or reading stopped early).
func (s *teeSide) next() (*teeBlock, bool) {
	if s.held != nil {
		s.t.release(s.held)
		s.held, s.cur = nil, nil
	}
	b, ok := <-s.ch
	return b, ok
}

// drain gives back what the consumer holds and every block it has not
// taken, until the reader is done.
func (s *teeSide) drain() {
	if s.held != nil {
		s.t.release(s.held)
		s.held, s.cur = nil, nil
	}
	for b := range s.ch {
		s.t.release(b)
	}
}

// stopped reports whether Read ended because reading stopped early (the
// consumer's error is then only a consequence of that).
func (s *teeSide) stopped() bool { return s.failed }

// wait lets the reader and hasher finish (giving back what the sides left
// unread; each side's goroutine must be done with it) and returns how many
// bytes were hashed and why reading stopped early.
func (t *hashTee) wait() (int64, error) {
	for _, s := range t.sides {
		s.drain()
	}
	<-t.hashed
	return t.n, t.err
}

// readerSource reads blocks from an io.Reader.
type readerSource struct{ r io.Reader }

// readerBlock is the size of a readerSource's blocks: a stream such as a
// ranged GET of a store.Object gives its bytes in reads of tens of
// kilobytes whatever the block, so a block of verifyBlock would only hold
// more of the heap (three of them per stream read, beside a snapshot that
// is setting live data aside in a rollback).
const readerBlock = 256 << 10

func (s readerSource) newBlock() []byte { return make([]byte, readerBlock) }

func (s readerSource) fill(buf []byte) ([]byte, error) {
	n, err := io.ReadFull(s.r, buf)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF // a short entry: the size check says so
	}
	return buf[:n], err
}

func (s readerSource) close() {
	if c, ok := s.r.(io.Closer); ok {
		c.Close()
	}
}

// blockReader is an io.ReadCloser over a blockSource, through one block.
type blockReader struct {
	src      blockSource
	buf, cur []byte
	err      error
}

func (r *blockReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.cur, r.err = r.src.fill(r.buf)
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *blockReader) Close() error {
	r.src.close()
	return nil
}
