package agecrypt

import (
	"bytes"
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"

	"github.com/nats-keeper/nats-keeper/store"
)

// Opener decrypts stored archives with its identities. It is safe for
// concurrent use.
type Opener struct{ ids []age.Identity }

// NewOpener opens archives with ids (an empty list opens none: every
// Open is refused with ErrNoIdentity).
func NewOpener(ids []age.Identity) *Opener { return &Opener{ids: ids} }

// Holds reports whether it has an identity (a nil Opener has none).
func (op *Opener) Holds() bool { return op != nil && len(op.ids) > 0 }

// maxHeader bounds the age header read from a stored object.
const maxHeader = 1 << 20

// Open decrypts o: the returned Object reads the plaintext (its Size and
// Info().Size are the plaintext's; Info().Sum is o's, the ciphertext's).
// Closing it closes o. An Opener without identities refuses with
// ErrNoIdentity, one whose identities do not open it with
// ErrWrongIdentity, and a ciphertext that is not an age file, or whose
// last chunk does not authenticate, with ErrDamaged; o is then not closed.
func (op *Opener) Open(o store.Object) (store.Object, error) {
	if !op.Holds() {
		return nil, ErrNoIdentity
	}
	size := o.Size()
	hdr, err := age.ExtractHeader(io.NewSectionReader(o, 0, min(size, maxHeader)))
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrDamaged, err)
	}
	fileKey, err := age.DecryptHeader(hdr, op.ids...)
	var nomatch *age.NoIdentityMatchError
	switch {
	case errors.As(err, &nomatch):
		return nil, ErrWrongIdentity
	case err != nil:
		return nil, fmt.Errorf("%w (%v)", ErrDamaged, err)
	}
	base := int64(len(hdr)) + nonceSize
	nonce := make([]byte, nonceSize)
	if _, err := o.ReadAt(nonce, int64(len(hdr))); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the payload nonce: %w", err)
	}
	plain, ok := plainSize(size - base)
	if !ok {
		return nil, fmt.Errorf("%w (its payload of %d bytes cannot be age chunks)", ErrDamaged, size-base)
	}
	aead, err := payloadAEAD(fileKey, nonce)
	if err != nil {
		return nil, err
	}
	ra, n, err := age.DecryptReaderAt(o, size, age.NewInjectedFileKeyIdentity(fileKey))
	clear(fileKey)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrDamaged, err)
	}
	if n != plain {
		return nil, fmt.Errorf("%w (its plaintext is %d bytes, not %d)", ErrDamaged, n, plain)
	}
	info := o.Info()
	info.Size = plain
	return &plainObject{o: o, ra: ra, aead: aead, base: base, size: plain, info: info}, nil
}

// plainObject is a stored age file read as its plaintext.
type plainObject struct {
	o    store.Object
	ra   io.ReaderAt
	aead cipher.AEAD
	base int64
	size int64
	info store.Info
}

func (p *plainObject) Size() int64      { return p.size }
func (p *plainObject) Info() store.Info { return p.info }
func (p *plainObject) Close() error     { return p.o.Close() }

// ReadAt reads plaintext at off; a chunk that does not authenticate is an
// error wrapping ErrDamaged.
func (p *plainObject) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.ra.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w (%v)", ErrDamaged, err)
	}
	return n, err
}

// Reader reads the plaintext's n bytes at off front to back: one ranged
// read of the chunks that hold them, each decrypted as it arrives.
func (p *plainObject) Reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > p.size {
		return nil, fmt.Errorf("reading %d bytes at %d of a plaintext of %d bytes: out of range", n, off, p.size)
	}
	if n == 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	first, last := off/ChunkSize, (off+n-1)/ChunkSize
	cOff := p.base + first*encChunk
	cEnd := min(p.base+(last+1)*encChunk, p.o.Size())
	rc, err := p.o.Reader(ctx, cOff, cEnd-cOff)
	if err != nil {
		return nil, err
	}
	return &chunkReader{p: p, rc: rc, idx: first, skip: int(off - first*ChunkSize), left: n,
		chunks: (p.size + ChunkSize - 1) / ChunkSize, ct: make([]byte, encChunk)}, nil
}

// chunkReader decrypts a run of chunks as they are read.
type chunkReader struct {
	p      *plainObject
	rc     io.ReadCloser
	idx    int64 // the next chunk to read
	chunks int64 // the payload's chunks (at least 1)
	skip   int   // plaintext bytes of the first chunk before the range
	left   int64 // plaintext bytes of the range still to hand out
	ct     []byte
	pt     []byte // decrypted, not yet handed out
	err    error
}

func (c *chunkReader) Read(b []byte) (int, error) {
	for len(c.pt) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if c.left == 0 {
			return 0, io.EOF
		}
		c.err = c.next()
	}
	k := copy(b, c.pt)
	c.pt = c.pt[k:]
	return k, nil
}

// next reads and decrypts chunk idx.
func (c *chunkReader) next() error {
	size := encChunk
	lastChunk := c.idx == max(c.chunks, 1)-1
	if lastChunk {
		size = int(c.p.o.Size() - (c.p.base + c.idx*encChunk))
	}
	if _, err := io.ReadFull(c.rc, c.ct[:size]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading chunk %d of the encrypted archive: %w", c.idx, err)
	}
	pt, err := c.p.aead.Open(c.ct[:0], chunkNonce(c.idx, lastChunk), c.ct[:size], nil)
	if err != nil {
		return fmt.Errorf("%w (chunk %d does not authenticate)", ErrDamaged, c.idx)
	}
	pt = pt[c.skip:]
	c.skip = 0
	if int64(len(pt)) > c.left {
		pt = pt[:c.left]
	}
	c.left -= int64(len(pt))
	c.pt = pt
	c.idx++
	return nil
}

func (c *chunkReader) Close() error { return c.rc.Close() }
