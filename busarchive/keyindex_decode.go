package busarchive

import (
	"encoding/binary"
	"fmt"
)

// indexDecoder reads a key index's fields from b, checking each length
// against what is left before it takes it. The first problem is kept in
// err; later reads then return zeros.
type indexDecoder struct {
	b   []byte
	err error
	at  string // what is being read, for the problem's sentence
}

func (d *indexDecoder) fail(kind error, format string, a ...any) {
	if d.err == nil {
		d.err = &EntryError{Entry: keyIndexEntry, Kind: kind, Detail: fmt.Sprintf(format, a...)}
	}
}

func (d *indexDecoder) uv() uint64 { return varint(d, binary.Uvarint) }
func (d *indexDecoder) sv() int64  { return varint(d, binary.Varint) }

// varint is the varint read decodes from what is left.
func varint[T int64 | uint64](d *indexDecoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	x, n := read(d.b)
	if n <= 0 {
		d.fail(ErrFormat, "%s does not decode", d.at)
		return 0
	}
	d.b = d.b[n:]
	return x
}

// off is an unsigned varint that must be at most bound.
func (d *indexDecoder) off(bound int64) int64 {
	x := d.uv()
	if x > uint64(bound) {
		d.fail(ErrFormat, "%s is %d, over %d", d.at, x, bound)
		return 0
	}
	return int64(x)
}

// bytes is a length then that many bytes, the length at most bound.
func (d *indexDecoder) bytes(bound int) []byte {
	n := d.uv()
	if d.err == nil && (n > uint64(bound) || n > uint64(len(d.b))) {
		d.fail(ErrFormat, "%s declares %d bytes, over its bound of %d or the %d left", d.at, n, bound, len(d.b))
	}
	if d.err != nil {
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *indexDecoder) sum() (out [32]byte) {
	if d.err == nil && len(d.b) < len(out) {
		d.fail(ErrFormat, "%s is cut short", d.at)
	}
	if d.err != nil {
		return out
	}
	copy(out[:], d.b)
	d.b = d.b[len(out):]
	return out
}

// count is a count of items of at least min bytes each, at most bound.
func (d *indexDecoder) count(bound, min int) int {
	n := d.uv()
	if d.err == nil && (n > uint64(bound) || n > uint64(len(d.b)/min)) {
		d.fail(ErrFormat, "%s is %d, over its bound of %d or what the %d bytes left hold", d.at, n, bound, len(d.b))
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

// index decodes what follows the magic.
func (d *indexDecoder) index() (*KeyIndex, error) {
	d.at = "its version"
	if v := d.uv(); d.err == nil && v != keyIndexVersion {
		d.fail(ErrFormat, "it is of version %d; this keeper reads version %d", v, keyIndexVersion)
	}
	d.at = "its stream name"
	ix := &KeyIndex{Stream: string(d.bytes(MaxStreamNameLen))}
	if d.err == nil && !ValidStreamName(ix.Stream) {
		d.fail(ErrFormat, "it names stream %q, not a valid stream name", printable(ix.Stream))
	}
	d.at = "its sizes"
	ix.Size, ix.Plain = d.off(MaxDataSize), d.off(maxIndexedPlain)
	ix.FirstSeq, ix.LastSeq = d.uv(), d.uv()
	d.chunks(ix)
	d.messages(ix)
	if d.err != nil {
		if ee, ok := d.err.(*EntryError); ok && ix.Stream != "" {
			ee.Entry += " of stream " + printable(ix.Stream)
		}
		return nil, d.err
	}
	return ix, nil
}

// chunks decodes the chunks: each after the one before, inside the entry,
// the first decoding from offset 0.
func (d *indexDecoder) chunks(ix *KeyIndex) {
	d.at = "its chunk count"
	n := d.count(MaxKeyIndexChunks, 2)
	ix.Chunks = make([]IndexChunk, 0, n)
	var prev IndexChunk
	for i := range n {
		d.at = fmt.Sprintf("chunk %d", i)
		off := d.off(2*ix.Size + 1)
		c := IndexChunk{Off: prev.Off + off>>1, Raw: off&1 == 1, Plain: prev.Plain + d.off(ix.Plain)}
		switch {
		case d.err != nil:
			return
		case c.Off >= ix.Size || c.Plain > ix.Plain || (i > 0 && c.Off == prev.Off):
			d.fail(ErrFormat, "chunk %d lies at %d (decoded %d), outside the entry's %d bytes (decoded %d) or on the chunk before", i, c.Off, c.Plain, ix.Size, ix.Plain)
		case i == 0 && (c.Off == 0 || c.Plain != 0):
			d.fail(ErrFormat, "the first chunk lies at %d (decoded %d), not after the stream identifier at decoded 0", c.Off, c.Plain)
		}
		ix.Chunks = append(ix.Chunks, c)
		prev = c
	}
}

// messages decodes the messages: rising sequences inside the head's,
// entries inside the decoded archive, each sum matching its fields.
func (d *indexDecoder) messages(ix *KeyIndex) {
	d.at = "its message count"
	n := d.count(MaxKeyIndexMessages, minIndexedMessage)
	ix.Messages = make([]IndexedMessage, 0, n)
	var seq uint64
	for i := range n {
		d.at = fmt.Sprintf("message %d", i)
		m := IndexedMessage{Seq: seq + d.uv(), Time: d.sv(), Off: d.off(ix.Plain), Len: d.off(ix.Plain)}
		m.Subject = string(d.bytes(maxIndexedSubject))
		if h := d.bytes(maxIndexedHeader); len(h) > 0 {
			m.Header = h
		}
		m.DataSum, m.Sum = d.sum(), d.sum()
		switch {
		case d.err != nil:
			return
		case m.Seq <= seq || m.Seq < ix.FirstSeq || m.Seq > ix.LastSeq:
			d.fail(ErrFormat, "message %d has sequence %d, not above %d inside the head's %d..%d", i, m.Seq, seq, ix.FirstSeq, ix.LastSeq)
		case m.Len == 0 || m.Off > ix.Plain-m.Len || len(ix.Chunks) == 0:
			d.fail(ErrFormat, "message %d (sequence %d) lies at %d for %d bytes, outside the decoded archive's %d", i, m.Seq, m.Off, m.Len, ix.Plain)
		case entrySum(m.Seq, m.Time, m.Subject, m.Header, m.DataSum) != m.Sum:
			d.fail(ErrChecksum, "message %d (sequence %d, subject %q) does not match its entry sum", i, m.Seq, printable(m.Subject))
		}
		ix.Messages = append(ix.Messages, m)
		seq = m.Seq
	}
}
