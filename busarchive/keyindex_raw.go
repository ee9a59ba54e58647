package busarchive

import (
	"context"
	"fmt"
	"io"
)

// Messages in uncompressed s2 chunks (s2 stores a block it cannot compress
// so: its bytes follow the chunk's header and CRC as they are) are read as
// their own bytes, without the rest of their chunks: ReadIndexed reads the
// range from a message's first byte to its last (neighbours within
// indexGap in one range) and cuts out the headers of the chunks it spans.

// rawSpan is where m lies in the data entry when every chunk it lies in
// is uncompressed, and those chunks (first to last), so that its bytes
// are read alone: the range from its first byte to its last, which holds
// the headers of the chunks after the first, cut out (cutRaw).
func (ix *KeyIndex) rawSpan(m IndexedMessage) (off, end int64, first, last int, ok bool) {
	first, last = ix.chunkOf(m.Off), ix.chunkOf(m.Off+m.Len-1)
	if first < 0 || m.Len <= 0 || m.Off+m.Len > ix.Plain {
		return 0, 0, 0, 0, false
	}
	for i := first; i <= last; i++ {
		if !ix.Chunks[i].Raw {
			return 0, 0, 0, 0, false
		}
	}
	cf, cl := ix.Chunks[first], ix.Chunks[last]
	off, end = cf.Off+rawChunkHead+m.Off-cf.Plain, cl.Off+rawChunkHead+m.Off+m.Len-cl.Plain
	return off, end, first, last, end-off <= m.Len+int64(last-first)*rawChunkHead+indexGap
}

// rawGroupMax bounds the bytes one read of messages in uncompressed chunks
// holds.
const rawGroupMax = 8 << 20

// rawGroup is how many of ms, from the first, lie in uncompressed chunks
// and within indexGap of each other, so that one range read holds them
// all (at most rawGroupMax bytes, or the first alone), and that range; 0
// when the first does not lie in uncompressed chunks.
func (ix *KeyIndex) rawGroup(ms []IndexedMessage) (n int, off, end int64) {
	for _, m := range ms {
		o, e, _, _, ok := ix.rawSpan(m)
		if !ok || (n > 0 && (o > end+indexGap || e-off > rawGroupMax)) {
			break
		}
		if n == 0 {
			off = o
		}
		n, end = n+1, e
	}
	return n, off, end
}

// readRaw reads ms, which lie in uncompressed chunks at off to end of the
// data entry, in one range, and cuts each out of it.
func readRaw(ctx context.Context, ix *KeyIndex, ms []IndexedMessage, off, end int64, read RangeFunc, fn func(ArchivedMessage) error) error {
	rc, err := read(ctx, off, end-off)
	if err != nil {
		return fmt.Errorf("reading stream %s's archive bytes %d to %d for message %d: %w", ix.Stream, off, end, ms[0].Seq, err)
	}
	defer rc.Close()
	raw := make([]byte, end-off)
	if _, err := io.ReadFull(rc, raw); err != nil {
		return &IndexedReadError{Stream: ix.Stream, Seq: ms[0].Seq, Kind: ErrFormat, Detail: fmt.Sprintf("its bytes %d to %d of the archive do not read: %v", off, end, err)}
	}
	for _, m := range ms {
		entry, err := ix.cutRaw(m, raw, off)
		if err == nil {
			err = handOut(ix.Stream, m, entry, fn)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// handOut decodes m's entry, checked against m, and hands it to fn.
func handOut(stream string, m IndexedMessage, entry []byte, fn func(ArchivedMessage) error) error {
	am, err := decodeIndexed(stream, m, entry)
	if err != nil {
		return err
	}
	return fn(am)
}

// cutRaw is m's entry out of raw, the data entry's bytes from off: each of
// its uncompressed chunks' part of it, their headers cut out.
func (ix *KeyIndex) cutRaw(m IndexedMessage, raw []byte, off int64) ([]byte, error) {
	if first, last := ix.chunkOf(m.Off), ix.chunkOf(m.Off+m.Len-1); first == last && first >= 0 {
		c := ix.Chunks[first]
		if at := c.Off + rawChunkHead + m.Off - c.Plain - off; at >= 0 && at+m.Len <= int64(len(raw)) {
			return raw[at : at+m.Len], nil // inside one chunk: no header to cut
		}
	}
	entry := make([]byte, 0, m.Len)
	for i := ix.chunkOf(m.Off); i >= 0 && i < len(ix.Chunks) && int64(len(entry)) < m.Len; i++ {
		c, plainEnd := ix.Chunks[i], ix.Plain
		if i+1 < len(ix.Chunks) {
			plainEnd = ix.Chunks[i+1].Plain
		}
		from, to := max(m.Off, c.Plain), min(m.Off+m.Len, plainEnd)
		at := c.Off + rawChunkHead + from - c.Plain - off
		if from > to || at < 0 || at+to-from > int64(len(raw)) {
			break
		}
		entry = append(entry, raw[at:at+to-from]...)
	}
	if int64(len(entry)) != m.Len {
		return nil, &IndexedReadError{Stream: ix.Stream, Seq: m.Seq, Kind: ErrFormat, Detail: "the index's uncompressed chunks do not hold it"}
	}
	return entry, nil
}
