package agecrypt

import (
	"bytes"
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"maps"
	"slices"

	"filippo.io/age"

	"github.com/nats-keeper/nats-keeper/store"
)

// Sealer encrypts new archives to its recipients. It is safe for
// concurrent use.
type Sealer struct {
	names []string
	recs  []age.Recipient
}

// NewSealer checks the recipients (age X25519, age1…; 1 to MaxRecipients;
// one named twice counts once).
func NewSealer(recipients []string) (*Sealer, error) {
	s := &Sealer{}
	for _, r := range recipients {
		rc, err := ParseRecipient(r)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(s.names, rc.String()) {
			s.names = append(s.names, rc.String())
			s.recs = append(s.recs, rc)
		}
	}
	switch {
	case len(s.recs) == 0:
		return nil, errors.New("no recipient to encrypt to")
	case len(s.recs) > MaxRecipients:
		return nil, fmt.Errorf("%d recipients, over %d", len(s.recs), MaxRecipients)
	}
	return s, nil
}

// Recipients are the public keys it encrypts to.
func (s *Sealer) Recipients() []string { return slices.Clone(s.names) }

// keyCatcher is a recipient that notes the file key age.Encrypt wraps.
type keyCatcher struct {
	age.Recipient
	key *[]byte
}

func (c keyCatcher) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	*c.key = slices.Clone(fileKey)
	return c.Recipient.Wrap(fileKey)
}

// Writer is a store.Writer that encrypts what is written to it into the
// store.Writer under it. Its Hold and WriteAt work on the plaintext as
// store.Writer says, for a held range of at most ChunkSize bytes.
type Writer struct {
	w     store.Writer
	aead  cipher.AEAD
	base  int64  // the payload's offset in the ciphertext (after header and nonce)
	idx   int64  // the index of the chunk in buf
	buf   []byte // the plaintext of chunk idx, not yet sealed
	seal  []byte // scratch for a sealed chunk
	err   error
	plain int64 // plaintext bytes written

	holding          bool
	holdOff, holdEnd int64            // the held plaintext range
	held             map[int64][]byte // chunks of the held range whose place is written but which are not sealed
}

// Create begins an encrypted object on w: age's header for the
// recipients is written at once. Commit, Abort and the rest go through to
// w.
func (s *Sealer) Create(w store.Writer) (*Writer, error) {
	var fileKey []byte
	recs := slices.Clone(s.recs)
	recs[0] = keyCatcher{Recipient: recs[0], key: &fileKey}
	var hdr bytes.Buffer
	if _, err := age.Encrypt(&hdr, recs...); err != nil { // the header and the payload nonce; the stream it returns stays unused
		return nil, fmt.Errorf("making the age header: %w", err)
	}
	if len(fileKey) != fileKeyLen || hdr.Len() < nonceSize {
		return nil, errors.New("making the age header: the file key was not seen")
	}
	aead, err := payloadAEAD(fileKey, hdr.Bytes()[hdr.Len()-nonceSize:])
	clear(fileKey)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return nil, fmt.Errorf("writing the age header: %w", err)
	}
	return &Writer{w: w, aead: aead, base: int64(hdr.Len()), buf: make([]byte, 0, ChunkSize),
		seal: make([]byte, 0, encChunk), held: map[int64][]byte{}}, nil
}

// PlainSize is the plaintext's bytes written so far.
func (e *Writer) PlainSize() int64 { return e.plain }

func (e *Writer) fail(err error) error {
	if e.err == nil {
		e.err = err
	}
	return e.err
}

// Write appends plaintext. A chunk is sealed once it is full and more
// follows (the last chunk is sealed by Commit, flagged last).
func (e *Writer) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	total := len(p)
	for len(p) > 0 {
		if len(e.buf) == ChunkSize {
			if err := e.flush(); err != nil {
				return 0, e.fail(err)
			}
		}
		k := min(len(p), ChunkSize-len(e.buf))
		e.buf = append(e.buf, p[:k]...)
		p = p[k:]
	}
	e.plain += int64(total)
	return total, nil
}

// inHold reports whether chunk i holds bytes of the held range.
func (e *Writer) inHold(i int64) bool {
	return e.holding && i*ChunkSize < e.holdEnd && (i+1)*ChunkSize > e.holdOff
}

// flush writes the full chunk in buf: sealed, or, where the held range
// touches it, as zeros in its place, its plaintext kept until Release.
func (e *Writer) flush() error {
	var out []byte
	if e.inHold(e.idx) {
		e.held[e.idx] = slices.Clone(e.buf)
		out = make([]byte, encChunk)
	} else {
		out = e.aead.Seal(e.seal[:0], chunkNonce(e.idx, false), e.buf, nil)
	}
	if _, err := e.w.Write(out); err != nil {
		return err
	}
	e.idx++
	e.buf = e.buf[:0]
	return nil
}

// chunkOff is chunk i's offset in the ciphertext.
func (e *Writer) chunkOff(i int64) int64 { return e.base + i*encChunk }

// Hold keeps the n plaintext bytes at off changeable by WriteAt until
// Release; they must not have been written out yet, and n is at most
// ChunkSize.
func (e *Writer) Hold(off, n int64) {
	if e.err != nil {
		return
	}
	first := e.idx * ChunkSize
	switch {
	case e.holding:
		e.fail(fmt.Errorf("holding %d bytes at %d while %d..%d is held, so the object can no longer be committed", n, off, e.holdOff, e.holdEnd))
		return
	case off < first || n < 0 || n > ChunkSize:
		e.fail(fmt.Errorf("holding %d bytes at %d: only up to %d bytes from %d can be held, so the object can no longer be committed", n, off, ChunkSize, first))
		return
	case n == 0:
		return
	}
	e.holding, e.holdOff, e.holdEnd = true, off, off+n
	from, to := off/ChunkSize, (off+n-1)/ChunkSize
	e.w.Hold(e.chunkOff(from), (to-from+1)*encChunk)
}

// WriteAt patches plaintext inside the held range.
func (e *Writer) WriteAt(p []byte, off int64) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	end := off + int64(len(p))
	if !e.holding || off < e.holdOff || end > e.holdEnd || end > e.plain {
		return 0, e.fail(fmt.Errorf("writing %d..%d, outside the held and written bytes, so the object can no longer be committed", off, end))
	}
	for n := 0; n < len(p); {
		i := (off + int64(n)) / ChunkSize
		at := int((off + int64(n)) % ChunkSize)
		dst := e.held[i]
		if i == e.idx {
			dst = e.buf
		}
		if dst == nil {
			return 0, e.fail(fmt.Errorf("writing at %d: its chunk is no longer held, so the object can no longer be committed", off))
		}
		n += copy(dst[at:], p[n:])
	}
	return len(p), nil
}

// Release seals the held chunks already written out, in their places, and
// ends the hold.
func (e *Writer) Release() {
	if !e.holding {
		return
	}
	e.holding = false
	for _, i := range slices.Sorted(maps.Keys(e.held)) {
		if e.err == nil {
			out := e.aead.Seal(e.seal[:0], chunkNonce(i, false), e.held[i], nil)
			if _, err := e.w.WriteAt(out, e.chunkOff(i)); err != nil {
				e.fail(err)
			}
		}
		delete(e.held, i)
	}
	e.w.Release()
}

// Commit seals the last chunk and commits the object under it. Its Info is
// the ciphertext's.
func (e *Writer) Commit(ctx context.Context) (store.Info, error) {
	if e.err == nil && e.holding {
		e.fail(errors.New("committing while a range is held"))
	}
	if e.err != nil {
		e.w.Abort()
		return store.Info{}, e.err
	}
	out := e.aead.Seal(e.seal[:0], chunkNonce(e.idx, true), e.buf, nil)
	if _, err := e.w.Write(out); err != nil {
		e.fail(err)
		e.w.Abort()
		return store.Info{}, err
	}
	e.err = errors.New("the encrypted object is already committed")
	return e.w.Commit(ctx)
}

// Abort gives the object up.
func (e *Writer) Abort() {
	e.fail(errors.New("the encrypted object was aborted"))
	e.w.Abort()
}
