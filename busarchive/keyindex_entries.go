package busarchive

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/nats-io/nats-server/v2/server/archive"
)

// How the Indexer reads the decoded archive (NATSARC1, server/archive):
// the magic, then entries, each its name's length, timestamp, sequence,
// header size and payload size as varints, its name, and its payload. It
// reads them itself, counting every byte, where the server's reader reads
// ahead: each recorded message's offset is exact. The order is
// snapDecoder's (snapshot.go): state.json, the consumer entries (sequence
// 0), the messages in rising sequence order, the end-of-backup sentinel.

// entryHead is one entry's fields, as its header encodes them.
type entryHead struct {
	name           []byte
	ts             int64
	seq            uint64
	hdrLen, payLen int64
}

// indexedEntryCost is about what a recorded message adds to an encoded
// index beside its subject and header: its fields and two sums.
const indexedEntryCost = 5*binary.MaxVarintLen64 + 64

// entries reads the archive's entries up to its end-of-backup sentinel,
// recording the messages keep chooses.
func (b *indexBuild) entries() error {
	var magic [len(archive.MagicBytes)]byte
	if _, err := io.ReadFull(b, magic[:]); err != nil {
		return fmt.Errorf("the snapshot does not read: %w", noEOF(err))
	}
	if string(magic[:]) != archive.MagicBytes {
		return fmt.Errorf("not a NATS Server 2.15 stream snapshot: it does not begin with %s", archive.MagicBytes)
	}
	var lastSeq uint64
	for first := true; ; first = false {
		at := b.pos
		h, err := b.head()
		if err != nil {
			return err
		}
		switch {
		case first:
			if err := b.state(h); err != nil {
				return err
			}
			lastSeq = b.ix.FirstSeq - 1
		case h.seq == 0 && h.ts == 0 && h.hdrLen == 0 && h.payLen == 0:
			return nil
		case h.seq == 0: // a consumer entry
			if err := b.skip(h.hdrLen + h.payLen); err != nil {
				return err
			}
		case h.seq <= lastSeq:
			return fmt.Errorf("message sequence %d is out of order after %d", h.seq, lastSeq)
		default:
			lastSeq = h.seq
			if err := b.message(h, at); err != nil {
				return err
			}
		}
	}
}

// head reads one entry's fields and name.
func (b *indexBuild) head() (*entryHead, error) {
	bad := func(err error) (*entryHead, error) {
		return nil, fmt.Errorf("an entry's header at decoded offset %d does not read: %w", b.pos, noEOF(err))
	}
	nameLen, err := binary.ReadUvarint(b)
	if err != nil {
		return bad(err)
	}
	h := &entryHead{}
	var hl, pl uint64
	if h.ts, err = binary.ReadVarint(b); err == nil {
		if h.seq, err = binary.ReadUvarint(b); err == nil {
			if hl, err = binary.ReadUvarint(b); err == nil {
				pl, err = binary.ReadUvarint(b)
			}
		}
	}
	if err != nil {
		return bad(err)
	}
	if nameLen > maxIndexedSubject {
		return nil, fmt.Errorf("%w: an entry's name is %d bytes, over %d", ErrIndexOver, nameLen, maxIndexedSubject)
	}
	if hl > maxMessageEntry || pl > maxMessageEntry {
		return nil, fmt.Errorf("entry at decoded offset %d declares %d+%d bytes, over the bound of %d", b.pos, hl, pl, maxMessageEntry)
	}
	h.hdrLen, h.payLen = int64(hl), int64(pl)
	h.name = make([]byte, nameLen)
	if _, err := io.ReadFull(b, h.name); err != nil {
		return bad(err)
	}
	return h, nil
}

// state reads state.json, the first entry, for the head's sequences.
func (b *indexBuild) state(h *entryHead) error {
	n := h.hdrLen + h.payLen
	if string(h.name) != "state.json" || h.seq != 0 || n > maxStateEntry {
		return fmt.Errorf("the snapshot begins with %q of %d bytes, not state.json", printable(string(h.name)), n)
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(b, raw); err != nil {
		return fmt.Errorf("reading state.json: %w", noEOF(err))
	}
	var st snapState
	if err := json.Unmarshal(raw[h.hdrLen:], &st); err != nil {
		return fmt.Errorf("state.json does not decode: %w", err)
	}
	b.ix.FirstSeq, b.ix.LastSeq = st.FirstSeq, st.LastSeq
	return nil
}

// message reads one message entry, which began at decoded offset at, and
// records it when keep chooses it.
func (b *indexBuild) message(h *entryHead, at int64) error {
	subject := string(h.name)
	mode := b.keep(subject)
	if mode == KeepNone {
		return b.skip(h.hdrLen + h.payLen)
	}
	if h.hdrLen > maxIndexedHeader {
		return fmt.Errorf("%w: message %d's header is %d bytes, over %d", ErrIndexOver, h.seq, h.hdrLen, maxIndexedHeader)
	}
	m := IndexedMessage{Seq: h.seq, Time: h.ts, Subject: subject, Off: at}
	if h.hdrLen > 0 {
		m.Header = make([]byte, h.hdrLen)
		if _, err := io.ReadFull(b, m.Header); err != nil {
			return fmt.Errorf("reading message %d: %w", h.seq, noEOF(err))
		}
	}
	if err := b.hash(h.payLen, &m.DataSum); err != nil {
		return fmt.Errorf("reading message %d: %w", h.seq, noEOF(err))
	}
	m.Len = b.pos - at
	m.Sum = entrySum(m.Seq, m.Time, m.Subject, m.Header, m.DataSum)
	return b.record(m, mode)
}

// record adds m to the index: in place of its subject's last message for
// KeepLast.
func (b *indexBuild) record(m IndexedMessage, mode KeepMode) error {
	cost := int64(len(m.Subject) + len(m.Header) + indexedEntryCost)
	if i, ok := b.last[m.Subject]; ok && mode == KeepLast {
		b.size += int64(len(m.Header) - len(b.ix.Messages[i].Header))
		b.ix.Messages[i] = m
		return nil
	}
	b.size += cost
	if len(b.ix.Messages) >= MaxKeyIndexMessages || b.size > MaxKeyIndexSize {
		b.ix.Messages, b.last = nil, nil // given up: held no longer
		return fmt.Errorf("%w: over %d messages or %d bytes", ErrIndexOver, MaxKeyIndexMessages, MaxKeyIndexSize)
	}
	if mode == KeepLast {
		b.last[m.Subject] = len(b.ix.Messages)
	}
	b.ix.Messages = append(b.ix.Messages, m)
	return nil
}

// hash reads n decoded bytes into the SHA-256 sum, hashing them where
// they lie in the read buffer (Peek of at most its size fails only at the
// end of what it reads).
func (b *indexBuild) hash(n int64, sum *[32]byte) error {
	h := sha256.New()
	for n > 0 {
		p, err := b.r.Peek(int(min(n, int64(b.r.Size()))))
		h.Write(p)
		b.r.Discard(len(p))
		n, b.pos = n-int64(len(p)), b.pos+int64(len(p))
		if err != nil && n > 0 {
			return err
		}
	}
	h.Sum(sum[:0])
	return nil
}

// skip reads over n decoded bytes.
func (b *indexBuild) skip(n int64) error {
	if _, err := io.CopyN(io.Discard, b, n); err != nil {
		return fmt.Errorf("the snapshot ends inside an entry: %w", noEOF(err))
	}
	return nil
}

// Read and ReadByte read the decoded archive, counting.
func (b *indexBuild) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.pos += int64(n)
	return n, err
}

func (b *indexBuild) ReadByte() (byte, error) {
	c, err := b.r.ReadByte()
	if err == nil {
		b.pos++
	}
	return c, err
}
