package busarchive

import (
	"context"
	"errors"
	"hash"
	"io"
	"sync/atomic"
)

// verifyBlocks is how many blocks of verifyBlock bytes one verification
// holds: being read, being hashed, and waiting for or being read by the
// decoder.
const verifyBlocks = 6

// errTeeStopped is what the decoder reads when reading the entry stopped
// early (the caller reports why, from wait).
var errTeeStopped = errors.New("the read of the entry stopped")

// blockSource reads an entry's bytes into blocks, front to back.
type blockSource interface {
	// fill reads the next bytes into buf and returns the slice of buf that
	// holds the entry's bytes, with io.EOF when the entry ends there.
	fill(buf []byte) ([]byte, error)
	close()
}

// hashTee reads an entry once, front to back, in a goroutine of its own, for
// two consumers on two cores: a goroutine that does nothing but hash every
// block (SHA-256 is the slower of the two and sets the pace) and the decoder,
// which calls Read. A block goes back to the pool when both are done with it,
// so memory is bounded by verifyBlocks blocks.
type hashTee struct {
	toHash   chan *teeBlock // blocks read, in order, for the hasher
	toDecode chan *teeBlock // the same blocks, for the decoder
	free     chan *teeBlock
	hashed   chan struct{} // closed when the hasher is done

	cur    []byte    // what the decoder has not read of its block
	held   *teeBlock // the decoder's block
	failed bool      // Read returned errTeeStopped

	// Set by the reader before it closes toHash and toDecode.
	err error // why reading stopped early, nil at the end of the entry
	// Set by the hasher before it closes hashed.
	n int64
}

type teeBlock struct {
	buf  []byte // the whole buffer
	data []byte // the entry's bytes in it
	refs atomic.Int32
}

// startHashTee starts reading src and hashing it into h; newBuf makes the
// block buffers.
func startHashTee(ctx context.Context, src blockSource, h hash.Hash, newBuf func() []byte) *hashTee {
	t := &hashTee{
		toHash: make(chan *teeBlock, verifyBlocks), toDecode: make(chan *teeBlock, verifyBlocks),
		free: make(chan *teeBlock, verifyBlocks), hashed: make(chan struct{}),
	}
	for range verifyBlocks {
		t.free <- &teeBlock{buf: newBuf()}
	}
	go t.read(ctx, src)
	go func() {
		defer close(t.hashed)
		for b := range t.toHash {
			h.Write(b.data)
			t.n += int64(len(b.data))
			t.release(b)
		}
	}()
	return t
}

// read fills free blocks from src and hands each to both consumers. The
// sends never block: there are as many places in each channel as blocks.
// (One read at a time: two direct reads at once were slower here, taking CPU
// from the hasher and the decoder.)
func (t *hashTee) read(ctx context.Context, src blockSource) {
	defer func() {
		src.close()
		close(t.toHash)
		close(t.toDecode)
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
			b.refs.Store(2)
			t.toHash <- b
			t.toDecode <- b
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

// Read is the decoder's side.
func (t *hashTee) Read(p []byte) (int, error) {
	for len(t.cur) == 0 {
		if t.held != nil {
			t.release(t.held)
			t.held = nil
		}
		b, ok := <-t.toDecode
		if !ok {
			if t.err != nil {
				t.failed = true
				return 0, errTeeStopped
			}
			return 0, io.EOF
		}
		t.held, t.cur = b, b.data
	}
	n := copy(p, t.cur)
	t.cur = t.cur[n:]
	return n, nil
}

// wait lets the reader and hasher finish (releasing what the decoder left
// unread) and returns how many bytes were hashed and why reading stopped
// early.
func (t *hashTee) wait() (int64, error) {
	if t.held != nil {
		t.release(t.held)
		t.held, t.cur = nil, nil
	}
	for b := range t.toDecode {
		t.release(b)
	}
	<-t.hashed
	return t.n, t.err
}

// stopped reports whether Read ended because reading stopped early (the
// decoder's error is then only a consequence of that).
func (t *hashTee) stopped() bool { return t.failed }

// readerSource reads blocks from an io.Reader.
type readerSource struct{ r io.Reader }

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
