package busarchive

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// StreamCheck checks one stream archive as it is written, as Verify checks
// a stream of an archive read back: what is written through it (the
// stream's stream.arc.s2, the very bytes its StreamWriter hashes into the
// manifest) is decoded to its end sentinel on a goroutine of its own, on
// another core than the writer's; once the stream is finished, Hold holds
// what was decoded, and its backup.json, to the stream's manifest entry.
//
// The data entry's SHA-256 is not computed a second time: the manifest's is
// the writer's, of these same bytes, and what a store later gives back is
// checked against it by whoever reads it (Verify, CheckedStreamData). Its
// CRC-32C is (CRC), so that a reader of the archive the check held can
// check its bytes against that instead (Archive.NoteWritten).
//
// One goroutine writes; Close ends the data. Memory: checkBlocks blocks.
type StreamCheck struct {
	name string
	pipe *checkPipe
	done chan struct{}
	// Set before done is closed.
	dec *decodedStream
	n   int64  // the bytes written through it
	crc uint32 // their CRC-32C
	err error  // why reading stopped early (ctx ended)
}

// NewStreamCheck begins checking the stream archive of stream as it is
// written through the returned StreamCheck. The check stops when ctx ends.
func NewStreamCheck(ctx context.Context, stream string) *StreamCheck {
	c := &StreamCheck{name: stream, pipe: newCheckPipe(ctx), done: make(chan struct{})}
	go c.run(ctx)
	return c
}

func (c *StreamCheck) run(ctx context.Context) {
	defer close(c.done)
	defer close(c.pipe.gone)
	r := &hashingReader{ctx: ctx, r: c.pipe, h: crc32.New(castagnoli)} // counts
	c.dec = decodeStream(ctx, c.name, r, func() bool { return false })
	// What follows the end sentinel, or what did not decode: read to the
	// end, so the writer never waits for a reader gone, and counted.
	if _, err := io.Copy(io.Discard, r); err != nil {
		c.err = err
	}
	c.n = r.n
	c.crc = r.h.(hash.Hash32).Sum32()
}

// CRC is the CRC-32C of the bytes written through the check, once Close
// returned.
func (c *StreamCheck) CRC() uint32 {
	c.Close()
	return c.crc
}

// Write takes the next bytes of the stream archive.
func (c *StreamCheck) Write(p []byte) (int, error) { return c.pipe.write(p) }

// Close ends the data and waits until all of it is decoded. It can be
// called more than once.
func (c *StreamCheck) Close() error {
	c.pipe.close()
	<-c.done
	c.pipe.release()
	return nil
}

// Hold holds the stream, once its writer finished it, to sm, its manifest
// entry, and to meta, its backup.json as written, as Verify checks them
// read back: the data entry's size, the state, consumers, sequences (and
// cut) its snapshot holds; backup.json's size, SHA-256, that it decodes
// and names the stream. It returns the stream's report, the bytes checked,
// and the problems found (errors.Join of *EntryError, as Verify).
func (c *StreamCheck) Hold(sm *StreamManifest, meta []byte) (StreamReport, int64, error) {
	c.Close()
	rep := c.dec.rep
	n := c.n + int64(len(meta))
	if c.err != nil {
		return rep, n, fmt.Errorf("the check of %s as it was written stopped: %w", DataEntry(c.name), c.err)
	}
	var problems []error
	if e := sm.Entries[0]; c.n != e.Size {
		problems = append(problems, &EntryError{Entry: e.Name, Kind: ErrChecksum, Detail: fmt.Sprintf("%d bytes were checked as written, the manifest declares %d", c.n, e.Size)})
	}
	problems = append(problems, c.dec.heldTo(sm)...)
	h := sha256.New()
	h.Write(meta)
	problems = append(problems, sumProblems(sm.Entries[1], int64(len(meta)), h)...)
	problems = append(problems, metaProblems(sm, meta)...)
	rep.Complete = rep.Complete && len(problems) == 0
	return rep, n, errors.Join(problems...)
}

// checkBlocks is how many blocks of readerBlock bytes a StreamCheck holds:
// being filled by the writer, and waiting for or being read by the decoder.
const checkBlocks = 4

// errCheckGone is what a write meets once the check stopped reading (its
// context ended).
var errCheckGone = errors.New("the check of the stream archive as it is written stopped")

// checkPipe hands what a writer writes to a reader on another goroutine,
// copied into blocks, so that the writer goes on while the reader works
// through what came before, until every block waits for the reader.
type checkPipe struct {
	ctx    context.Context
	full   chan []byte   // blocks written, in order; closed at the end of the data
	free   chan []byte   // blocks to fill
	gone   chan struct{} // closed when the reader is done
	fill   []byte        // the writer's block
	closed bool          // the writer's end was written
	cur    []byte        // what the reader has not read of its block
	held   []byte        // the reader's block
}

func newCheckPipe(ctx context.Context) *checkPipe {
	p := &checkPipe{ctx: ctx, full: make(chan []byte, checkBlocks), free: make(chan []byte, checkBlocks), gone: make(chan struct{})}
	for range checkBlocks {
		p.free <- make([]byte, 0, readerBlock)
	}
	return p
}

// write copies b into blocks, handing each to the reader once full. The
// sends never block: there are as many places in each channel as blocks.
func (p *checkPipe) write(b []byte) (int, error) {
	if p.closed {
		return 0, errors.New("the check of the stream archive was closed, so the bytes were not checked")
	}
	n := 0
	for len(b) > 0 {
		if p.fill == nil {
			select {
			case p.fill = <-p.free:
			case <-p.gone:
				return n, errCheckGone
			}
		}
		k := copy(p.fill[len(p.fill):cap(p.fill)], b)
		p.fill = p.fill[:len(p.fill)+k]
		b, n = b[k:], n+k
		if len(p.fill) == cap(p.fill) {
			p.full <- p.fill
			p.fill = nil
		}
	}
	return n, nil
}

// close hands the reader the last block and the end of the data.
func (p *checkPipe) close() {
	if p.closed {
		return
	}
	p.closed = true
	if len(p.fill) > 0 {
		p.full <- p.fill
	}
	p.fill = nil
	close(p.full)
}

// release lets go of the blocks once the writer closed and the reader is
// done: a check is held until every stream of its archive is written, and
// its blocks would be held with it. Safe twice.
func (p *checkPipe) release() {
	p.fill, p.held, p.cur = nil, nil, nil
	for len(p.free) > 0 {
		<-p.free
	}
	for range p.full { // closed by close
	}
}

// Read is the reader's side: the bytes written, in order, then io.EOF.
func (p *checkPipe) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.held != nil {
			p.free <- p.held[:0]
			p.held = nil
		}
		select {
		case blk, ok := <-p.full:
			if !ok {
				return 0, io.EOF
			}
			p.held, p.cur = blk, blk
		case <-p.ctx.Done():
			return 0, p.ctx.Err()
		}
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}
