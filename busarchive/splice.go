package busarchive

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
)

// NamedEntry is one consumer entry of a stream archive: its name and its
// JSON ({"config":…,"state":…}).
type NamedEntry struct {
	Name  string
	Entry []byte
}

// SpliceStreamArchive writes to w a stream archive of head and consumers,
// then every message of base (a stream archive), then the messages more
// puts, in rising sequence order above base's last sequence, then the end
// sentinel. Base's messages are not decoded: its s2 chunks after those
// that hold its own head pass through byte for byte, but for the first
// (after its head) and the last two, decoded and encoded again (the end
// sentinel is dropped from them). s2 readers read the streams one after
// another as one (see BumpLastSeq). head must count base's messages and
// more's: nothing here counts them; a verification of the archive does.
//
// base is read to its end; its integrity is its reader's to check (a
// checked reader fails a read of damaged bytes). baseSize is its length
// (0: not known). Memory: the chunks that hold base's head, at most
// maxSpliceHead, and one chunk; three near base's end (spliceEnd), or
// throughout when baseSize is not known.
func SpliceStreamArchive(w io.Writer, head ArchiveHead, consumers []NamedEntry, base io.Reader, baseSize int64, more func(put func(ArchivedMessage) error) error) error {
	hw, err := NewStreamArchiveWriter(w, head)
	if err != nil {
		return err
	}
	for _, c := range consumers {
		if err := hw.Consumer(c.Name, c.Entry); err != nil {
			hw.zw.Reset(nil)
			return err
		}
	}
	if hw.consumersLeft > 0 {
		hw.zw.Reset(nil)
		return fmt.Errorf("the head declares %d consumers and %d were given", head.Consumers, len(consumers))
	}
	if err := hw.zw.Close(); err != nil { // no sentinel: the messages follow
		return fmt.Errorf("writing the stream archive's head: %w", err)
	}
	after, err := passBase(w, base, baseSize)
	if err != nil {
		return fmt.Errorf("passing the base archive's messages through: %w", err)
	}
	return appendMessages(w, max(after, head.FirstSeq-1), head.LastSeq, more)
}

// maxSpliceHead bounds the decoded bytes of base's head (state.json and
// its consumer entries) SpliceStreamArchive holds.
const maxSpliceHead = 64 << 20

// spliceEnd is how near base's end, beyond twice its largest data chunk so
// far, passBase begins to hold data chunks back: room for what may follow
// the last data chunk (an s2 index, padding). A chunk passed on further
// from the end holds none of the end sentinel: it would hold some only
// were it the last data chunk, or the one before a last too small to
// hold the sentinel alone, and then more than spliceEnd bytes that are
// not data would follow the last data chunk; base ending so, what is held
// at its end does not end with the sentinel, and the splice fails.
const spliceEnd = 1 << 20

// passBase writes base's messages to w as s2 chunks, and returns base's
// head's last sequence. size is base's length (0: not known).
func passBase(w io.Writer, r io.Reader, size int64) (uint64, error) {
	cr := &countingReader{r: r}
	r = cr
	var plain []byte
	var start int
	var last uint64
	for first := true; ; first = false {
		_, decoded, err := readChunk(r, first)
		if err != nil {
			return 0, err
		}
		plain = append(plain, decoded...)
		var ok bool
		if start, last, ok, err = headEnd(plain); err != nil {
			return 0, err
		} else if ok {
			break
		}
		if len(plain) > maxSpliceHead {
			return 0, fmt.Errorf("its head does not end within %d bytes", maxSpliceHead)
		}
	}
	rest := plain[start:] // decoded bytes still to write, before the chunks held
	var held [][]byte     // raw data chunks held back: the sentinel is in the last two
	var spare []byte      // a chunk written, its memory read into again
	largest := 0
	for {
		chunk, err := readRawChunk(r, spare)
		spare = nil
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		if chunk[0] != chunkCompress && chunk[0] != chunkPlain {
			continue // stream identifiers, the index, padding: not needed between data chunks
		}
		held = append(held, chunk)
		largest = max(largest, len(chunk))
		far := size > 0 && size-cr.n > 2*int64(largest)+spliceEnd
		if len(held) <= 2 && !far {
			continue
		}
		if err := encodeS2(w, rest); err != nil {
			return 0, err
		}
		rest = nil
		if _, err := w.Write(held[0]); err != nil {
			return 0, err
		}
		spare, held = held[0], held[1:]
	}
	for _, c := range held {
		d, err := decodeChunk(c[0], c[4:])
		if err != nil {
			return 0, err
		}
		rest = append(rest, d...)
	}
	sentinel := entryBytes(nil, "", 0, 0, nil, nil)
	if !bytes.HasSuffix(rest, sentinel) {
		return 0, fmt.Errorf("it does not end with the end-of-backup sentinel in its last two data chunks (of its %d bytes; "+
			"an s2 stream with more than %d bytes after its last data chunk cannot be spliced)", cr.n, spliceEnd)
	}
	return last, encodeS2(w, rest[:len(rest)-len(sentinel)])
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// headEnd is where base's messages begin in plain, its first decoded
// bytes, and its head's last sequence; ok false when plain ends before.
func headEnd(plain []byte) (start int, last uint64, ok bool, err error) {
	h, err := parseStateEntry(plain)
	if err != nil || h == nil {
		return 0, 0, false, err
	}
	var st snapState
	if err := json.Unmarshal(plain[h.json:h.end], &st); err != nil {
		return 0, 0, false, fmt.Errorf("its state.json does not decode: %w", err)
	}
	at := h.end
	for range st.Consumers {
		eh, n, err := parseEntryHeader(plain[at:])
		if err != nil {
			return 0, 0, false, fmt.Errorf("a consumer entry: %w", err)
		}
		if n == 0 {
			return 0, 0, false, nil
		}
		if eh.name > maxSpliceHead || eh.size > maxConsumerEntry {
			return 0, 0, false, errors.New("a consumer entry is over its bound")
		}
		p := at + n + int(eh.name) + int(eh.size)
		if p > len(plain) {
			return 0, 0, false, nil
		}
		at = p
	}
	return at, st.LastSeq, true, nil
}

// readRawChunk reads one s2 chunk whole, as it is, into buf where it fits
// (a chunk is up to a block: not allocated again for each of a GiB of
// them); io.EOF at the end.
func readRawChunk(r io.Reader, buf []byte) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("s2 chunk header: %w", err)
	}
	n := int(h[1]) | int(h[2])<<8 | int(h[3])<<16
	if (h[0] == chunkCompress || h[0] == chunkPlain) && n > s2.MaxEncodedLen(maxBlockLen)+4 {
		return nil, fmt.Errorf("an s2 data chunk of %d bytes is over the bound of a block", n)
	}
	chunk := buf[:0]
	if cap(chunk) < 4+n {
		chunk = make([]byte, 0, 4+n)
	}
	chunk = chunk[:4+n]
	copy(chunk, h[:])
	if _, err := io.ReadFull(r, chunk[4:]); err != nil {
		return nil, fmt.Errorf("s2 chunk of %d bytes: %w", n, noEOF(err))
	}
	return chunk, nil
}

// encodeS2 writes plain to w as an s2 stream of its own (nothing when it
// is empty).
func encodeS2(w io.Writer, plain []byte) error {
	if len(plain) == 0 {
		return nil
	}
	zw := s2.NewWriter(w, s2.WriterConcurrency(1))
	_, err := zw.Write(plain)
	return errors.Join(err, zw.Close())
}

// appendMessages writes to w, as an s2 stream of its own, the messages
// more puts, each above after and at most last, then the end sentinel.
func appendMessages(w io.Writer, after, last uint64, more func(put func(ArchivedMessage) error) error) error {
	zw := s2.NewWriter(w, s2.WriterConcurrency(1)) // a segment's messages: one block at a time is enough, and holds one
	var buf []byte
	put := func(m ArchivedMessage) error {
		switch {
		case m.Seq <= after:
			return fmt.Errorf("message %d is out of order: a message must be above sequence %d", m.Seq, after)
		case m.Seq > last:
			return fmt.Errorf("message %d is above the head's last sequence %d", m.Seq, last)
		case m.Subject == "":
			return fmt.Errorf("message %d has no subject", m.Seq)
		case len(m.Header)+len(m.Data) > maxMessageEntry:
			return fmt.Errorf("message %d is %d bytes, over the bound of %d", m.Seq, len(m.Header)+len(m.Data), maxMessageEntry)
		}
		after = m.Seq
		buf = entryBytes(buf[:0], m.Subject, m.Seq, m.Time, m.Header, m.Data)
		_, err := zw.Write(buf)
		return err
	}
	err := more(put)
	if err == nil {
		_, err = zw.Write(entryBytes(nil, "", 0, 0, nil, nil))
	}
	if err != nil {
		zw.Reset(nil)
		return err
	}
	return zw.Close()
}

// entryBytes appends to b one NATSARC1 entry as the archive writer writes
// it: its name's length, timestamp, sequence, header size and payload
// size, then its name, header block and payload.
func entryBytes(b []byte, name string, seq uint64, ts int64, hdr, data []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = binary.AppendVarint(b, ts)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(hdr)))
	b = binary.AppendUvarint(b, uint64(len(data)))
	b = append(b, name...)
	return append(append(b, hdr...), data...)
}
