package busarchive

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// A stream archive (stream.arc.s2) message by message: ReadStreamArchive
// reads one, StreamArchiveWriter (streamarc_write.go) writes one, and
// BumpLastSeq (bump.go) raises the last sequence its head declares. The
// format is the server's snapshot, described above snapDecoder
// (snapshot.go).
//
// Which fields of the head (state.json) must be exact, read from
// nats-server 2.15.3 RestoreStreamV2 and jsm.go v0.5.1 backup (Decoder,
// Verify, Info):
//
//   - first_seq: exact. The server compacts the new stream to it before the
//     first message, and both it and jsm.go refuse a message at or below
//     first_seq - 1 (with first_seq 0, any message).
//   - last_seq: exact. After the last message the server pads the stream
//     with skipped sequences up to it, so it is the restored stream's last
//     sequence whenever it is above the last message's; that is what
//     BumpLastSeq uses. The server refuses a head whose first_seq is 0 and
//     last_seq is not, or whose first_seq is above last_seq + 1, or above
//     last_seq with messages.
//   - messages: checked only to be at most last_seq - first_seq + 1 (and 0
//     when first_seq is 0 or last_seq + 1); jsm.go does not check it (its
//     Info calls a 0 "advisory"). The restored count is the messages stored.
//   - bytes: not checked against the messages by either. The server reserves
//     that much of the account's storage before the first message and
//     refuses the restore when it is over the account's or the server's
//     limits, so a head that overstates its bytes can fail where the stream
//     fits; an understated one is corrected as messages are stored.
//   - consumer_count: exact: exactly that many consumers/<name> entries
//     follow state.json, for both.
//   - first_ts, last_ts, num_subjects, subjects, deleted, lost: read by
//     neither; the restored stream has its own from its messages.

// ArchivedMessage is one message of a stream archive (stream.arc.s2).
type ArchivedMessage struct {
	Seq     uint64
	Time    int64 // unix ns
	Subject string
	Header  []byte // the stored header block (NATS/1.0 …), nil when none
	Data    []byte
}

// ArchiveHead is the state.json an archive begins with (the server's
// StreamState), parsed.
type ArchiveHead struct {
	FirstSeq, LastSeq, Msgs, Bytes uint64
	FirstTime, LastTime            int64 // unix ns; 0 when absent
	Consumers                      int
	Raw                            []byte // the entry as it is in the archive
	// Stamp is the time (unix ns) a writer gives the head's and the
	// consumers' entries: 0, the time of writing. Two writes of the same
	// archive with the same Stamp are the same bytes (a moment composed
	// again, see keeper/spool.Recomposed). Not read back.
	Stamp int64
}

// maxMessageEntry bounds one message of an archive, its header block and
// its data: the server's max_payload cannot exceed its max_pending, 64 MiB
// unless configured otherwise, and a restore refuses a message over the
// target server's max_payload.
const maxMessageEntry = 64 << 20

// ReadStreamArchive reads a stream.arc.s2 front to back: the head, each
// consumer entry to consumer (nil: skipped), each message to msg (nil:
// skipped). It checks the archive's own structure (order, end sentinel) and
// bounds every length; an error of fn stops it and is returned.
//
// The entry and the message's Header and Data are the callee's to keep: each
// call gets slices of its own. The head is returned with an error too once
// it was read (nil before).
func ReadStreamArchive(r io.Reader, consumer func(name string, entry []byte) error, msg func(ArchivedMessage) error) (*ArchiveHead, error) {
	d := newSnapDecoder(r)
	var fnErr error
	d.consumer = func(name string, entry []byte) error {
		if err := checkConsumerEntry(entry); err != nil {
			return err
		}
		if consumer == nil {
			return nil
		}
		if err := consumer(name, append([]byte(nil), entry...)); err != nil {
			fnErr = err
			return err
		}
		return nil
	}
	var head *ArchiveHead
	for {
		it, err := d.next()
		if fnErr != nil {
			return head, fnErr
		}
		if err != nil {
			return head, fmt.Errorf("the stream archive does not read: %w", err)
		}
		switch it {
		case itemState:
			head = headOf(&d.state, d.buf)
		case itemMessage:
			if msg == nil {
				continue
			}
			m, err := readMessage(d)
			if err != nil {
				return head, fmt.Errorf("the stream archive does not read: %w", err)
			}
			if err := msg(m); err != nil {
				return head, err
			}
		case itemEnd:
			if len(d.hdr.Name) != 0 {
				// The server's restore takes only a nameless sentinel.
				return head, fmt.Errorf("the stream archive does not read: its end-of-backup sentinel is named %q", printable(string(d.hdr.Name)))
			}
			return head, nil
		}
	}
}

// headOf is the head state.json (raw) decodes to.
func headOf(st *snapState, raw []byte) *ArchiveHead {
	return &ArchiveHead{
		FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Msgs: st.Msgs, Bytes: st.Bytes,
		FirstTime: unixNano(st.FirstTime), LastTime: unixNano(st.LastTime),
		Consumers: st.Consumers,
		Raw:       append([]byte(nil), raw...),
	}
}

// unixNano is t in unix ns, 0 for the zero time (absent from state.json, or
// the server's own zero).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// checkConsumerEntry checks a consumers/<name> entry as the server's restore
// does before using it: {"config":{…},"state":{…}}, both present.
func checkConsumerEntry(entry []byte) error {
	var c snapConsumer
	if err := json.Unmarshal(entry, &c); err != nil {
		return fmt.Errorf("does not decode: %w", err)
	}
	if c.Config != '{' {
		return errors.New("has no config")
	}
	if c.State != '{' {
		return errors.New("has no state")
	}
	return nil
}

// readMessage reads the message d just decoded, whole, into a buffer of its
// own. The buffer grows with what arrives, not with what is declared, so a
// declared size the archive does not hold allocates nothing.
func readMessage(d *snapDecoder) (ArchivedMessage, error) {
	h := d.hdr
	n := h.HeaderSize + h.PayloadSize // the archive reader keeps both and their sum non-negative
	if n > maxMessageEntry {
		return ArchivedMessage{}, fmt.Errorf("message %d declares %d bytes, over the bound of %d", h.Sequence, n, maxMessageEntry)
	}
	b := make([]byte, 0, min(n, 64<<10))
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(min(n-int64(len(b)), int64(len(b)))))
		}
		m, err := d.r.Read(b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+m]
		if err != nil {
			return ArchivedMessage{}, fmt.Errorf("reading message %d: %w", h.Sequence, err)
		}
	}
	m := ArchivedMessage{Seq: h.Sequence, Time: h.Timestamp, Subject: string(h.Name)}
	if h.HeaderSize > 0 {
		m.Header = b[:h.HeaderSize:h.HeaderSize]
	}
	if h.PayloadSize > 0 {
		m.Data = b[h.HeaderSize:n:n]
	}
	return m, nil
}
