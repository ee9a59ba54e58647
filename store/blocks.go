package store

import (
	"crypto/sha256"
	"errors"
	"io"
)

// BlockSize is the most bytes of one block of a part (Blocks): a part
// writer takes memory a block at a time as a part fills, so a part that has
// barely begun holds a block, not PartSize bytes.
const BlockSize = 1 << 20

// Blocks is one part's bytes, in order, in blocks of the writer's block
// size (the last one may be shorter).
type Blocks [][]byte

// Len is the part's bytes.
func (b Blocks) Len() int {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return n
}

// Sum is the SHA-256 of the part's bytes.
func (b Blocks) Sum() [32]byte {
	h := sha256.New()
	for _, p := range b {
		h.Write(p)
	}
	return [32]byte(h.Sum(nil))
}

// Bytes is a copy of the part's bytes in one slice.
func (b Blocks) Bytes() []byte {
	out := make([]byte, 0, b.Len())
	for _, p := range b {
		out = append(out, p...)
	}
	return out
}

// Fill fills the blocks, each to its length, from r.
func (b Blocks) Fill(r io.Reader) error {
	for _, p := range b {
		if _, err := io.ReadFull(r, p); err != nil {
			return err
		}
	}
	return nil
}

// copyAt copies p into the bytes at off, as far as they go, and returns
// how many it copied.
func (b Blocks) copyAt(p []byte, off int64) int {
	done := 0
	for _, blk := range b {
		if off >= int64(len(blk)) {
			off -= int64(len(blk))
			continue
		}
		k := copy(blk[off:], p[done:])
		done, off = done+k, 0
		if done == len(p) {
			break
		}
	}
	return done
}

// NewBlocksReader reads b front to back; it seeks (so an HTTP client can
// send it again) and writes itself out a block at a time.
func NewBlocksReader(b Blocks) *BlocksReader { return &BlocksReader{b: b, size: int64(b.Len())} }

// BlocksReader is an io.ReadSeeker over Blocks.
type BlocksReader struct {
	b    Blocks
	size int64
	off  int64
	i    int   // the block holding off
	in   int64 // off's place in it
}

func (r *BlocksReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.b) {
		blk := r.b[r.i]
		k := copy(p[n:], blk[r.in:])
		n, r.in, r.off = n+k, r.in+int64(k), r.off+int64(k)
		if r.in == int64(len(blk)) {
			r.i, r.in = r.i+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo writes the rest of the blocks to w, one write each.
func (r *BlocksReader) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for r.i < len(r.b) {
		k, err := w.Write(r.b[r.i][r.in:])
		n += int64(k)
		r.off += int64(k)
		if err != nil {
			r.Seek(r.off, io.SeekStart)
			return n, err
		}
		r.i, r.in = r.i+1, 0
	}
	return n, nil
}

func (r *BlocksReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += r.off
	case io.SeekEnd:
		off += r.size
	}
	if off < 0 {
		return r.off, errors.New("seek before the start of a part")
	}
	r.off, r.i, r.in = off, 0, off
	for r.i < len(r.b) && r.in >= int64(len(r.b[r.i])) {
		r.in -= int64(len(r.b[r.i]))
		r.i++
	}
	return off, nil
}
