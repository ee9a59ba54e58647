package busarchive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server/archive"
)

// CutWriter passes a server's snapshot (stream.arc.s2) on to w as it
// arrives, s2 chunk by s2 chunk, but ends it before the first message
// stamped after the cut: that message, and every one after it, is not
// written. A snapshot taken after the cut holds every message stored at or
// before it; those stored after it are at its tail (a stream's times are
// its leader's clock, rising with its sequences), so the archive written
// holds exactly the messages stamped at or before the cut.
//
// How it costs one pass: each data chunk is decoded (its CRC checked) to
// read the entries' headers, and passed on byte for byte as it came. The
// chunk that holds the first message after the cut is encoded again, its
// bytes before that message and the end-of-backup sentinel, as chunks of
// the same s2 stream; what follows is dropped unread. A chunk is held back
// only while an entry's header runs on into the next one.
//
// The head (state.json) is the server's, unchanged: its last sequence
// stays the snapshot's, so a restore pads the stream with skipped
// sequences up to it and the sequences of the messages left out are never
// given to other messages; its message count is then above the messages
// held, which the server and jsm.go allow (see the head's fields in
// streamarc.go), as after a limit removed messages while a snapshot ran.
type CutWriter struct {
	mu    sync.Mutex
	w     io.Writer
	cut   int64 // unix ns
	in    []byte
	first bool // the stream identifier is read
	scan  arcScan
	held  []heldChunk // chunks held while an entry's header runs on
	buf   []byte      // reused for decoded chunks
	done  bool        // the archive was cut: the rest is dropped
	from  uint64      // the first message left out
	err   error
}

// heldChunk is a chunk held back: as it came and, for a data chunk, its
// decoded bytes.
type heldChunk struct{ raw, plain []byte }

// NewCutWriter passes the snapshot on to w, ended before the first message
// stamped after cut (unix ns).
func NewCutWriter(w io.Writer, cut int64) *CutWriter {
	return &CutWriter{w: w, cut: cut, scan: arcScan{magic: len(archive.MagicBytes)}}
}

// LeftOut is the first message's sequence left out, and whether any was.
func (c *CutWriter) LeftOut() (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.from, c.done
}

// Held is what the archive written holds, its bytes counted as a memory
// stream counts them when memory is set, else as a file stream does:
// complete once Close returned nil.
func (c *CutWriter) Held(memory bool) StreamCut {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.scan.held
	out := StreamCut{Msgs: h.msgs, Bytes: h.file, FirstSeq: h.first, LastSeq: h.last, From: c.from}
	if memory {
		out.Bytes = h.memory
	}
	return out
}

// Write takes the snapshot's next bytes. It returns the first error of w,
// or of a snapshot that is not a stream archive, again once it happened.
func (c *CutWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return len(p), nil
	}
	buf := p
	if len(c.in) > 0 {
		c.in = append(c.in, p...)
		buf = c.in
	}
	if !c.first && len(buf) > 0 && buf[0] != chunkStreamID {
		c.err = errors.New("the snapshot does not begin with an s2 stream identifier, so it was not cut")
		return 0, c.err
	}
	for len(buf) >= 4 && !c.done {
		n := int(buf[1]) | int(buf[2])<<8 | int(buf[3])<<16
		if len(buf) < 4+n {
			break
		}
		if c.err = c.chunk(buf[:4+n]); c.err != nil {
			return 0, c.err
		}
		buf = buf[4+n:]
	}
	if c.done {
		buf = nil
	}
	c.in = append(c.in[:0], buf...) // copy within c.in moves forward: safe
	return len(p), nil
}

// Close passes on what is held (an archive that ended inside a chunk, as
// it came: its reader tells). It does not close w.
func (c *CutWriter) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.done {
		return c.err
	}
	c.err = c.release()
	if c.err == nil && len(c.in) > 0 {
		c.err = c.out(c.in)
		c.in = nil
	}
	return c.err
}

// chunk takes one whole s2 chunk.
func (c *CutWriter) chunk(raw []byte) error {
	typ := raw[0]
	if !c.first {
		if typ != chunkStreamID {
			return errors.New("the snapshot does not begin with an s2 stream identifier, so it was not cut")
		}
		c.first = true
	}
	if typ != chunkCompress && typ != chunkPlain {
		if typ < 0x80 {
			return fmt.Errorf("the snapshot holds s2 chunk type %#x, which no reader skips, so it was not cut", typ)
		}
		return c.pass(raw)
	}
	plain, err := decodeChunkInto(&c.buf, typ, raw[4:])
	if err != nil {
		return fmt.Errorf("the snapshot's s2 chunk does not decode, so it was not cut: %w", err)
	}
	at, from, err := c.scan.feed(plain, c.cut)
	if err != nil {
		return fmt.Errorf("the snapshot's archive does not read, so it was not cut: %w", err)
	}
	switch {
	case from != 0 && at < 0: // its header began in the first chunk held
		return c.end(c.held[0].plain, c.scan.start, from)
	case from != 0:
		if err := c.release(); err != nil {
			return err
		}
		return c.end(plain, at, from)
	case c.scan.pending():
		if c.scan.here { // what is held before holds no header
			if err := c.release(); err != nil {
				return err
			}
		}
		return c.hold(raw, plain)
	}
	if err := c.release(); err != nil {
		return err
	}
	return c.out(raw)
}

// pass passes on raw, a chunk that holds no entry, or holds it behind
// those held.
func (c *CutWriter) pass(raw []byte) error {
	if len(c.held) == 0 {
		return c.out(raw)
	}
	return c.hold(raw, nil)
}

// hold holds raw and its decoded bytes back.
func (c *CutWriter) hold(raw, plain []byte) error {
	c.held = append(c.held, heldChunk{raw: bytes.Clone(raw), plain: bytes.Clone(plain)})
	if len(c.held) > 64 {
		return errors.New("an entry's header of the snapshot runs on over 64 s2 chunks, so it was not cut")
	}
	return nil
}

// release passes on the chunks held.
func (c *CutWriter) release() error {
	for _, h := range c.held {
		if err := c.out(h.raw); err != nil {
			return err
		}
	}
	c.held = nil
	return nil
}

// end writes plain[:at] and the end-of-backup sentinel as chunks of the
// same s2 stream, in place of the chunk holding message from (and every
// chunk held), and drops the rest.
func (c *CutWriter) end(plain []byte, at int, from uint64) error {
	var b bytes.Buffer
	zw := s2.NewWriter(&b, s2.WriterConcurrency(1))
	_, err := zw.Write(plain[:at])
	if err == nil {
		_, err = zw.Write(make([]byte, 5)) // the sentinel: no name, sequence, timestamp or sizes
	}
	if err = errors.Join(err, zw.Close()); err != nil {
		return fmt.Errorf("the snapshot's last chunk could not be encoded again, so it was not cut: %w", err)
	}
	chunks := b.Bytes()
	if len(chunks) < 4 || chunks[0] != chunkStreamID {
		return errors.New("the snapshot's last chunk encoded again has no s2 stream identifier, so it was not cut")
	}
	chunks = chunks[4+(int(chunks[1])|int(chunks[2])<<8|int(chunks[3])<<16):] // the stream goes on: no second identifier
	c.held, c.done, c.from, c.in = nil, true, from, nil
	return c.out(chunks)
}

func (c *CutWriter) out(p []byte) error {
	if _, err := c.w.Write(p); err != nil {
		return fmt.Errorf("writing the snapshot: %w", err)
	}
	return nil
}
