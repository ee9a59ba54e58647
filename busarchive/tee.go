package busarchive

import (
	"context"
	"errors"
	"hash"
	"io"
	"sync/atomic"
)

// verifyBlocks is how many blocks of verifyBlock bytes one verification
// holds: blocks being hashed, and the one the decoder reads.
const verifyBlocks = 4

// errTeeStopped is what the decoder reads when reading the entry stopped
// early (the caller reports why, from wait).
var errTeeStopped = errors.New("the read of the entry stopped")

// hashTee reads an entry once, front to back, for two consumers on two
// cores: the decoder, which calls Read (and so does the file reads on its own
// core), and a goroutine that does nothing but hash every block, since
// SHA-256 is the slower of the two and sets the pace. A block goes back to
// the pool when both are done with it, so memory is bounded by verifyBlocks
// blocks.
type hashTee struct {
	ctx    context.Context
	src    io.Reader
	toHash chan *teeBlock // blocks read, in order, for the hasher
	free   chan *teeBlock
	hashed chan struct{} // closed when the hasher is done
	cur    []byte        // what the decoder has not read of its block
	held   *teeBlock     // the decoder's block
	closed bool          // toHash is closed: the entry ended or reading stopped
	err    error         // why reading stopped early
	failed bool          // Read returned errTeeStopped
	n      int64         // bytes hashed, set by the hasher before hashed is closed
}

type teeBlock struct {
	buf  []byte
	n    int
	refs atomic.Int32
}

// startHashTee starts a hasher writing into h what Read reads from src.
func startHashTee(ctx context.Context, src io.Reader, h hash.Hash) *hashTee {
	t := &hashTee{ctx: ctx, src: src, toHash: make(chan *teeBlock, verifyBlocks),
		free: make(chan *teeBlock, verifyBlocks), hashed: make(chan struct{})}
	for range verifyBlocks {
		t.free <- &teeBlock{buf: make([]byte, verifyBlock)}
	}
	go func() {
		defer close(t.hashed)
		for b := range t.toHash {
			h.Write(b.buf[:b.n])
			t.n += int64(b.n)
			t.release(b)
		}
	}()
	return t
}

func (t *hashTee) release(b *teeBlock) {
	if b.refs.Add(-1) == 0 {
		t.free <- b // never blocks: there are as many places as blocks
	}
}

// stop ends the hasher's input; err is why reading stopped early, or nil at
// the end of the entry.
func (t *hashTee) stop(err error) {
	if !t.closed {
		t.closed, t.err = true, err
		close(t.toHash)
	}
}

// Read is the decoder's side: it reads the next block from src when the last
// one is used up and hands it to the hasher too.
func (t *hashTee) Read(p []byte) (int, error) {
	for len(t.cur) == 0 {
		if t.held != nil {
			t.release(t.held)
			t.held = nil
		}
		if t.closed {
			if t.err != nil {
				t.failed = true
				return 0, errTeeStopped
			}
			return 0, io.EOF
		}
		if err := t.ctx.Err(); err != nil {
			t.stop(err)
			continue
		}
		b := <-t.free
		n, err := io.ReadFull(t.src, b.buf)
		if n > 0 {
			b.n = n
			b.refs.Store(2)
			t.toHash <- b
			t.held, t.cur = b, b.buf[:n]
		} else {
			t.free <- b
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			t.stop(nil)
		case err != nil:
			t.stop(err)
		}
	}
	n := copy(p, t.cur)
	t.cur = t.cur[n:]
	return n, nil
}

// wait reads (and hashes) what the decoder left, lets the hasher finish and
// returns how many bytes were hashed and why reading stopped early.
func (t *hashTee) wait() (int64, error) {
	for {
		t.cur = nil
		if _, err := t.Read(nil); err != nil {
			break
		}
	}
	<-t.hashed
	return t.n, t.err
}

// stopped reports whether Read ended because reading stopped early (the
// decoder's error is then only a consequence of that).
func (t *hashTee) stopped() bool { return t.failed }
