package busarchive

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server/archive"
)

// StreamArchiveWriter writes a stream.arc.s2 the server restores as it would
// its own snapshot: the same s2 framing (an s2 writer with its default
// options, as the server's streamSnapshotV2 makes it) around the same
// NATSARC1 entries, state.json first, the consumers, the messages in rising
// sequence order and the end-of-backup sentinel.
//
// Its methods refuse what the server's restore (or jsm.go's decoder) would
// refuse, before writing it. After the first error every call returns that
// error; Close then releases the compressor without ending the archive, so
// an archive that failed part way never carries the sentinel.
type StreamArchiveWriter struct {
	zw            *s2.Writer
	aw            *archive.Writer
	head          ArchiveHead
	now           int64 // the timestamp of the head's and consumers' entries, as the server gives them
	consumersLeft int
	lastSeq       uint64 // a message must be above it
	err           error
	closed        bool
}

// NewStreamArchiveWriter begins an archive on w with head as its state.json.
// When head.Raw is set it is written as it is, and must decode to head's
// other fields (clear it to write changed fields); else state.json is made
// from the fields, with the server's names and order.
func NewStreamArchiveWriter(w io.Writer, head ArchiveHead) (*StreamArchiveWriter, error) {
	raw, err := headJSON(head)
	if err != nil {
		return nil, err
	}
	if err := checkHeadSeqs(head); err != nil {
		return nil, fmt.Errorf("the archive's head %w, so nothing was written", err)
	}
	// One encoder of 1 MiB blocks: a writer per segment of a capture is
	// made every second or so, and the default (a 4 MiB block per core,
	// encoded concurrently) would hold some 20 MiB each time, which a
	// keeper under its memory limit would collect and give back to the
	// system as often; one core encodes over 1 GB/s.
	zw := s2.NewWriter(w, s2.WriterConcurrency(1), s2.WriterBlockSize(1<<20))
	sw := &StreamArchiveWriter{
		zw: zw, aw: archive.NewWriter(zw), head: head, now: cmp.Or(head.Stamp, time.Now().UnixNano()),
		consumersLeft: head.Consumers, lastSeq: head.FirstSeq - 1,
	}
	sw.head.Raw = raw
	sw.entry("state.json", 0, 0, sw.now, raw, nil)
	if sw.err != nil {
		zw.Reset(nil)
		return nil, sw.err
	}
	return sw, nil
}

// headJSON is the state.json of head: its Raw when set (checked against its
// fields), else its fields in the server's JSON.
func headJSON(head ArchiveHead) ([]byte, error) {
	if head.Raw == nil {
		st := snapState{Msgs: head.Msgs, Bytes: head.Bytes, FirstSeq: head.FirstSeq, LastSeq: head.LastSeq, Consumers: head.Consumers,
			FirstTime: timeOf(head.FirstTime), LastTime: timeOf(head.LastTime)}
		return json.Marshal(&st)
	}
	if len(head.Raw) > maxStateEntry {
		return nil, fmt.Errorf("the archive's head is %d bytes, over the bound of %d, so nothing was written", len(head.Raw), maxStateEntry)
	}
	var st snapState
	if err := json.Unmarshal(head.Raw, &st); err != nil {
		return nil, fmt.Errorf("the archive's head (Raw) does not decode, so nothing was written: %w", err)
	}
	raw := head.Raw
	got := headOf(&st, nil)
	got.Raw, head.Raw = nil, nil
	if !headFieldsEqual(*got, head) {
		return nil, fmt.Errorf("the archive's head (Raw) says %+v, its fields %+v: clear Raw to write the fields; nothing was written", *got, head)
	}
	return bytes.Clone(raw), nil
}

func headFieldsEqual(a, b ArchiveHead) bool {
	a.Raw, b.Raw = nil, nil
	return a.FirstSeq == b.FirstSeq && a.LastSeq == b.LastSeq && a.Msgs == b.Msgs && a.Bytes == b.Bytes &&
		a.FirstTime == b.FirstTime && a.LastTime == b.LastTime && a.Consumers == b.Consumers
}

// timeOf is unix ns as the server's JSON gives a time: UTC, the zero time
// for 0.
func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// checkHeadSeqs refuses a head the server's restore refuses (RestoreStreamV2).
func checkHeadSeqs(h ArchiveHead) error {
	switch {
	case h.Consumers < 0:
		return fmt.Errorf("gives a negative consumer count (%d)", h.Consumers)
	case h.FirstSeq == 0 && (h.LastSeq != 0 || h.Msgs != 0):
		return fmt.Errorf("gives first sequence 0 with last sequence %d and %d messages", h.LastSeq, h.Msgs)
	case h.FirstSeq > h.LastSeq && (h.FirstSeq-1 != h.LastSeq || h.Msgs != 0):
		return fmt.Errorf("gives first sequence %d above last sequence %d with %d messages", h.FirstSeq, h.LastSeq, h.Msgs)
	case h.FirstSeq != 0 && h.FirstSeq <= h.LastSeq && h.Msgs > h.LastSeq-h.FirstSeq+1:
		return fmt.Errorf("gives %d messages between sequences %d and %d", h.Msgs, h.FirstSeq, h.LastSeq)
	case h.Bytes > 1<<63-1:
		return fmt.Errorf("gives %d bytes, more than the server takes", h.Bytes)
	}
	return nil
}

// Consumer writes one consumer entry, {"config":{…},"state":{…}} as the
// server's SnapshotConsumerState: as many as the head declares, before any
// message.
func (w *StreamArchiveWriter) Consumer(name string, entry []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.consumersLeft == 0 {
		return w.fail(fmt.Errorf("consumer %q is one more than the %d the head declares", printable(name), w.head.Consumers))
	}
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return w.fail(fmt.Errorf("consumer name %q is not one the server gives", printable(name)))
	}
	if len(entry) > maxConsumerEntry {
		return w.fail(fmt.Errorf("consumer %q is %d bytes, over the bound of %d", printable(name), len(entry), maxConsumerEntry))
	}
	if err := checkConsumerEntry(entry); err != nil {
		return w.fail(fmt.Errorf("consumer %q %w", printable(name), err))
	}
	w.consumersLeft--
	return w.entry("consumers/"+name, 0, 0, w.now, entry, nil)
}

// Message writes one message, in rising sequence order, within the head's
// first and last sequences.
func (w *StreamArchiveWriter) Message(m ArchivedMessage) error {
	if w.err != nil {
		return w.err
	}
	switch {
	case w.consumersLeft > 0:
		return w.fail(fmt.Errorf("message %d comes before the head's %d consumers were written (%d still to come)", m.Seq, w.head.Consumers, w.consumersLeft))
	case m.Seq <= w.lastSeq || m.Seq == 0 || w.head.FirstSeq == 0:
		return w.fail(fmt.Errorf("message %d is out of order: a message must be above sequence %d (the head's first is %d)", m.Seq, w.lastSeq, w.head.FirstSeq))
	case m.Seq > w.head.LastSeq:
		return w.fail(fmt.Errorf("message %d is above the head's last sequence %d", m.Seq, w.head.LastSeq))
	case m.Subject == "":
		return w.fail(fmt.Errorf("message %d has no subject", m.Seq))
	case len(m.Header)+len(m.Data) > maxMessageEntry:
		return w.fail(fmt.Errorf("message %d is %d bytes, over the bound of %d", m.Seq, len(m.Header)+len(m.Data), maxMessageEntry))
	}
	w.lastSeq = m.Seq
	return w.entry(m.Subject, m.Seq, int64(len(m.Header)), m.Time, m.Header, m.Data)
}

// Close ends the archive with the end-of-backup sentinel and flushes the
// compressor; it does not close the writer the archive goes to. After an
// error it only releases the compressor and returns the error.
func (w *StreamArchiveWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err == nil && w.consumersLeft > 0 {
		w.err = fmt.Errorf("the head declares %d consumers and %d were written", w.head.Consumers, w.head.Consumers-w.consumersLeft)
	}
	if w.err == nil {
		w.entry("", 0, 0, 0, nil, nil)
	}
	if w.err == nil {
		w.err = errors.Join(w.aw.Close(), w.zw.Close())
	}
	if w.err != nil {
		w.zw.Reset(nil) // stops its goroutine, writes nothing more
		return fmt.Errorf("the stream archive was not ended: %w", w.err)
	}
	return nil
}

// entry writes one entry: its header, then a and b as its payload (the
// message's header block and body).
func (w *StreamArchiveWriter) entry(name string, seq uint64, hdrSize, ts int64, a, b []byte) error {
	err := w.aw.WriteHeader(&archive.Header{Name: name, Sequence: seq, Timestamp: ts, HeaderSize: hdrSize, PayloadSize: int64(len(a)+len(b)) - hdrSize})
	if err == nil && len(a) > 0 {
		_, err = w.aw.Write(a)
	}
	if err == nil && len(b) > 0 {
		_, err = w.aw.Write(b)
	}
	if err != nil {
		return w.fail(fmt.Errorf("writing the stream archive: %w", err))
	}
	return nil
}

func (w *StreamArchiveWriter) fail(err error) error {
	w.err = err
	return err
}
