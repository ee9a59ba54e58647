package busarchive

import (
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
)

// indexFrames decodes an s2 stream (the framing bump.go describes) read
// from r, as s2's Reader does, and records each data chunk: where it lies in
// the stream and where its decoded bytes begin. Its buffers are reused from
// chunk to chunk.
type indexFrames struct {
	r       io.Reader
	off     int64 // bytes of the s2 stream read
	plain   int64 // decoded bytes produced
	chunks  []IndexChunk
	started bool
	body    []byte // the chunk being read
	dec     []byte // its decoded bytes
	cur     []byte // what of dec is not yet handed out
}

func (f *indexFrames) Read(p []byte) (int, error) {
	for len(f.cur) == 0 {
		if err := f.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, f.cur)
	f.cur = f.cur[n:]
	return n, nil
}

// next reads one chunk; a data chunk's decoded bytes are then in f.cur.
// io.EOF at a chunk's boundary ends the stream.
func (f *indexFrames) next() error {
	var h [4]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		if errors.Is(err, io.EOF) && f.started {
			return io.EOF
		}
		return fmt.Errorf("s2 chunk header: %w", noEOF(err))
	}
	at := f.off
	typ, n := h[0], int(h[1])|int(h[2])<<8|int(h[3])<<16
	if !f.started && typ != chunkStreamID {
		return errors.New("it does not begin with an s2 stream identifier")
	}
	f.started = true
	if (typ == chunkCompress || typ == chunkPlain) && n > s2.MaxEncodedLen(maxBlockLen)+4 {
		return fmt.Errorf("an s2 data chunk of %d bytes is over the bound of a block", n)
	}
	if typ < 0x80 && typ != chunkCompress && typ != chunkPlain {
		return fmt.Errorf("s2 chunk type %#x is not one a reader may skip", typ)
	}
	if cap(f.body) < n {
		f.body = make([]byte, n)
	}
	f.body = f.body[:n]
	if _, err := io.ReadFull(f.r, f.body); err != nil {
		return fmt.Errorf("s2 chunk of %d bytes: %w", n, noEOF(err))
	}
	f.off += int64(4 + n)
	if typ != chunkCompress && typ != chunkPlain {
		return nil // the stream identifier, padding, skippable chunks, the s2 index
	}
	if len(f.chunks) >= MaxKeyIndexChunks {
		return fmt.Errorf("%w: over %d s2 chunks", ErrIndexOver, MaxKeyIndexChunks)
	}
	dec, err := decodeChunkInto(&f.dec, typ, f.body)
	if err != nil {
		return err
	}
	f.chunks = append(f.chunks, IndexChunk{Off: at, Plain: f.plain, Raw: typ == chunkPlain})
	if f.plain += int64(len(dec)); f.plain > maxIndexedPlain {
		return fmt.Errorf("%w: the archive decodes to over %d bytes", ErrIndexOver, maxIndexedPlain)
	}
	f.cur = dec
	return nil
}

// drain reads the rest of the stream (after the archive's end: the s2
// index chunk, if any), so that off counts the whole stream.
func (f *indexFrames) drain() error {
	for {
		f.cur = nil
		if err := f.next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
