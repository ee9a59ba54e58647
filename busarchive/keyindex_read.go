package busarchive

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server/archive"
)

// RangeFunc reads the n bytes at off of a stream's data entry
// (stream.arc.s2), front to back. Close it.
type RangeFunc func(ctx context.Context, off, n int64) (io.ReadCloser, error)

// StreamDataRange reads the n bytes at off of streams/<stream>/stream.arc.s2:
// in one ranged read where the archive offers it (a store.Object, an
// encrypted archive's plaintext), else through ReadAt. The range must lie
// inside the entry. Close it.
func (a *Archive) StreamDataRange(ctx context.Context, stream string, off, n int64) (io.ReadCloser, error) {
	if a.manifest.Stream(stream) == nil {
		return nil, &EntryError{Entry: printable(DataEntry(stream)), Kind: ErrNoStream, Detail: fmt.Sprintf("the archive holds no stream %q", printable(stream))}
	}
	loc := a.entries[DataEntry(stream)]
	if off < 0 || n < 0 || off > loc.size-n {
		return nil, &EntryError{Entry: DataEntry(stream), Kind: ErrLayout, Detail: fmt.Sprintf("bytes %d to %d were asked for, outside the entry's %d", off, off+n, loc.size)}
	}
	if rc, ok, err := entryReader(ctx, a.r, loc.off+off, n); ok {
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", DataEntry(stream), err)
		}
		return rc, nil
	}
	return io.NopCloser(io.NewSectionReader(a.r, loc.off+off, n)), nil
}

// indexGap is how far apart two messages' chunks may lie and still be read
// in one range: reading the chunks between costs less than a request more.
const indexGap = 256 << 10

// ReadIndexed reads the messages ms, recorded in ix, from the stream's data
// entry through read, in the order they lie in it, and hands each to fn (its
// Header and Data its own). Each is one ranged read: of its own bytes where
// it lies in uncompressed chunks, else of the s2 chunks that hold it
// (messages whose chunks lie within indexGap of each other share one),
// those chunks decoded, their places checked against the index's. Its one
// archive entry is decoded and checked against what the index recorded:
// its sequence, subject, time, header, and the SHA-256 of its data, which
// stand in for the CRC of the chunk it was read from. A message that differs is an *IndexedReadError naming the stream
// and the sequence; an error of fn stops it and is returned.
func ReadIndexed(ctx context.Context, ix *KeyIndex, ms []IndexedMessage, read RangeFunc, fn func(ArchivedMessage) error) error {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(x, y IndexedMessage) int { return cmp.Compare(x.Off, y.Off) })
	for len(ms) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n, off, end := ix.rawGroup(ms); n > 0 {
			if err := readRaw(ctx, ix, ms[:n], off, end, read, fn); err != nil {
				return err
			}
			ms = ms[n:]
			continue
		}
		g, err := ix.group(ms)
		if err != nil {
			return err
		}
		if err := g.read(ctx, ix, read, fn); err != nil {
			return err
		}
		ms = ms[len(g.ms):]
	}
	return nil
}

// indexRange is one ranged read of ReadIndexed: chunks first to last of
// the index, and the messages they hold.
type indexRange struct {
	first, last int
	ms          []IndexedMessage
}

// group is the range that reads ms[0] and those after it whose chunks lie
// within indexGap of the ones before.
func (ix *KeyIndex) group(ms []IndexedMessage) (*indexRange, error) {
	var g *indexRange
	for _, m := range ms {
		first, last := ix.chunkOf(m.Off), ix.chunkOf(m.Off+m.Len-1)
		if first < 0 || m.Len <= 0 || m.Off+m.Len > ix.Plain {
			return nil, &IndexedReadError{Stream: ix.Stream, Seq: m.Seq, Kind: ErrFormat,
				Detail: fmt.Sprintf("the index places it at decoded bytes %d to %d, where no chunk of the archive's %d lies", m.Off, m.Off+m.Len, ix.Plain)}
		}
		switch {
		case g == nil:
			g = &indexRange{first: first, last: last}
		case ix.Chunks[first].Off > ix.chunkEnd(g.last)+indexGap:
			return g, nil
		}
		g.last = max(g.last, last)
		g.ms = append(g.ms, m)
	}
	return g, nil
}

// read reads the range's chunks and hands out its messages.
func (g *indexRange) read(ctx context.Context, ix *KeyIndex, read RangeFunc, fn func(ArchivedMessage) error) error {
	start := ix.Chunks[g.first].Off
	rc, err := read(ctx, start, ix.chunkEnd(g.last)-start)
	if err != nil {
		return fmt.Errorf("reading stream %s's archive bytes %d to %d for message %d: %w", ix.Stream, start, ix.chunkEnd(g.last), g.ms[0].Seq, err)
	}
	defer rc.Close()
	w := &indexWindow{ix: ix, next: g.first, f: &indexFrames{r: rc, started: true, off: start, plain: ix.Chunks[g.first].Plain}}
	w.at = w.f.plain
	for _, m := range g.ms {
		entry, err := w.bytes(m)
		if err == nil {
			err = handOut(ix.Stream, m, entry, fn)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// indexWindow holds the decoded bytes of a range's chunks from the message
// being read on: at most one message and one chunk.
type indexWindow struct {
	ix   *KeyIndex
	f    *indexFrames
	next int    // the index's chunk the range reads next
	buf  []byte // decoded bytes from at
	at   int64
}

// bytes is m's archive entry, the chunks that hold it read.
func (w *indexWindow) bytes(m IndexedMessage) ([]byte, error) {
	if drop := m.Off - w.at; drop > 0 {
		drop = min(drop, int64(len(w.buf)))
		w.buf, w.at = append(w.buf[:0], w.buf[drop:]...), w.at+drop
	}
	for w.at+int64(len(w.buf)) < m.Off+m.Len {
		if err := w.chunk(m); err != nil {
			return nil, err
		}
		if skip := m.Off - w.at; skip > 0 { // a chunk wholly before m
			skip = min(skip, int64(len(w.buf)))
			w.buf, w.at = w.buf[skip:], w.at+skip
		}
	}
	return w.buf[m.Off-w.at : m.Off-w.at+m.Len], nil
}

// chunk reads the range's next data chunk into the window, checking it
// lies where the index says.
func (w *indexWindow) chunk(m IndexedMessage) error {
	bad := func(kind error, detail string) error {
		return &IndexedReadError{Stream: w.ix.Stream, Seq: m.Seq, Kind: kind, Detail: detail}
	}
	if w.next >= len(w.ix.Chunks) {
		return bad(ErrFormat, "the index's chunks end before it")
	}
	want := w.ix.Chunks[w.next]
	n := len(w.f.chunks)
	if err := w.f.next(); err != nil {
		kind := ErrFormat
		switch {
		case errors.Is(err, io.EOF):
			err = io.ErrUnexpectedEOF
		case errors.Is(err, errBlockCRC):
			kind = ErrChecksum
		}
		return bad(kind, fmt.Sprintf("the archive's s2 chunk at %d does not read: %v", want.Off, err))
	}
	if len(w.f.chunks) == n {
		return nil // a chunk of no data
	}
	if got := w.f.chunks[n]; got != want {
		return bad(ErrFormat, fmt.Sprintf("the archive's s2 chunk %d lies at %d (decoded %d), the index says %d (decoded %d)", w.next, got.Off, got.Plain, want.Off, want.Plain))
	}
	w.next++
	w.buf = append(w.buf, w.f.cur...)
	w.f.cur, w.f.chunks = nil, w.f.chunks[:0]
	return nil
}

// decodeIndexed decodes the archive entry of m, checked against m.
func decodeIndexed(stream string, m IndexedMessage, entry []byte) (ArchivedMessage, error) {
	bad := func(kind error, format string, a ...any) (ArchivedMessage, error) {
		return ArchivedMessage{}, &IndexedReadError{Stream: stream, Seq: m.Seq, Kind: kind, Detail: fmt.Sprintf(format, a...)}
	}
	r := archive.NewReader(io.MultiReader(strings.NewReader(archive.MagicBytes), bytes.NewReader(entry)))
	h, err := r.Next()
	if err != nil {
		return bad(ErrFormat, "its archive entry does not decode: %v", err)
	}
	if h.Sequence != m.Seq || h.Name != m.Subject || h.Timestamp != m.Time {
		return bad(ErrChecksum, "its archive entry is message %d on %q at %d, the index recorded message %d on %q at %d",
			h.Sequence, printable(h.Name), h.Timestamp, m.Seq, printable(m.Subject), m.Time)
	}
	if n := h.HeaderSize + h.PayloadSize; n > int64(len(entry)) {
		return bad(ErrFormat, "its archive entry declares %d bytes, over the %d the index recorded", n, m.Len)
	}
	b := make([]byte, h.HeaderSize+h.PayloadSize)
	if _, err := io.ReadFull(r, b); err != nil {
		return bad(ErrFormat, "its archive entry does not read: %v", err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		return bad(ErrFormat, "its archive entry is shorter than the %d bytes the index recorded", m.Len)
	}
	am := ArchivedMessage{Seq: m.Seq, Time: m.Time, Subject: m.Subject}
	if h.HeaderSize > 0 {
		am.Header = b[:h.HeaderSize:h.HeaderSize]
	}
	if h.PayloadSize > 0 {
		am.Data = b[h.HeaderSize:]
	}
	if !bytes.Equal(am.Header, m.Header) {
		return bad(ErrChecksum, "its header is not the one the index recorded")
	}
	if sum := sha256.Sum256(am.Data); sum != m.DataSum {
		return bad(ErrChecksum, "its data's SHA-256 is %x, the index recorded %x", sum, m.DataSum)
	}
	if entrySum(am.Seq, am.Time, am.Subject, am.Header, m.DataSum) != m.Sum {
		return bad(ErrChecksum, "it does not match the index's entry sum")
	}
	return am, nil
}
