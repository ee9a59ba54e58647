package busarchive

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
)

// What the server's snapshot (stream.arc.s2) is, from the server's writer
// (nats-server v2.15 stream_backup.go, streamSnapshotV2) and its restore
// (RestoreStreamV2): an s2 stream holding a NATSARC1 archive
// (server/archive) of, in order,
//
//   - "state.json": the stream's state as the snapshot took it, JSON;
//   - one "consumers/<name>" entry per consumer, as many as state.json's
//     consumer_count: JSON {"config":…,"state":…};
//   - the messages, one entry each: its subject as the name, its sequence
//     (never 0), its timestamp, and its stored headers then its body as the
//     payload (HeaderSize and PayloadSize split it), ascending by sequence
//     and all after state.json's first_seq - 1;
//   - the end-of-backup sentinel: an entry whose sequence, timestamp and
//     sizes are all 0.
//
// snapDecoder checks exactly that, no more: the invariants the server's
// restore relies on, as jsm.go's backup decoder (v0.5.1) checks them. It
// reads state.json and each consumer entry whole, after checking their
// declared sizes against bounds; it never holds a message, whose payload the
// archive reader (arcReader, as the server's) skips.
type snapDecoder struct {
	r             *arcReader
	phase         snapPhase
	state         snapState
	consumersLeft int
	lastSeq       uint64     // the sequence a message must be above
	seq           uint64     // the message just decoded
	hdr           *arcHeader // the entry just decoded (its name valid until the next)
	after         string     // what was decoded last, for errors, when it was not a message
	afterMsg      uint64     // the message decoded last, when it was one
	buf           []byte     // reused for state.json and the consumer entries
	err           error
	// consumer, when set, is given each consumer entry to decode and check
	// (its bytes valid for the call only), in place of the decoder's own
	// check of its config and state.
	consumer func(name string, entry []byte) error
}

type snapPhase int

const (
	phaseState snapPhase = iota
	phaseConsumers
	phaseMessages
	phaseDone
)

// snapItem is what one step of the decoder found.
type snapItem int

const (
	itemState snapItem = iota
	itemConsumer
	itemMessage
	itemEnd
)

// Bounds on the entries the decoder reads whole into memory.
const (
	maxStateEntry    = 64 << 10
	maxConsumerEntry = 8 << 20
)

// entryTooLarge is a head entry (state.json, a consumer) whose declared size
// is over its bound: the snapshot is not decoded further.
type entryTooLarge struct {
	what     string
	n, bound int64
}

func (e *entryTooLarge) Error() string {
	return fmt.Sprintf("%s declares %d bytes, over the bound of %d", e.what, e.n, e.bound)
}

// snapState is state.json, and the "state" of backup.json: the server's
// StreamState as JSON. Its fields have the server's JSON names and types, so
// that what decodes here decodes in the server and in jsm.go; only the first
// and last sequence, the counts and the bytes are used.
type snapState struct {
	Msgs        uint64            `json:"messages"`
	Bytes       uint64            `json:"bytes"`
	FirstSeq    uint64            `json:"first_seq"`
	FirstTime   time.Time         `json:"first_ts"`
	LastSeq     uint64            `json:"last_seq"`
	LastTime    time.Time         `json:"last_ts"`
	NumSubjects int               `json:"num_subjects,omitempty"`
	Subjects    map[string]uint64 `json:"subjects,omitempty"`
	NumDeleted  int               `json:"num_deleted,omitempty"`
	Deleted     []uint64          `json:"deleted,omitempty"`
	Lost        *struct {
		Msgs  []uint64 `json:"msgs"`
		Bytes uint64   `json:"bytes"`
	} `json:"lost,omitempty"`
	Consumers int `json:"consumer_count"`
}

// jsonKind records only the first byte of a JSON value ('{' for an object,
// 'n' for null), so a consumer entry's config and state are checked for
// presence without being copied.
type jsonKind byte

func (k *jsonKind) UnmarshalJSON(b []byte) error {
	if len(b) > 0 {
		*k = jsonKind(b[0])
	}
	return nil
}

// snapConsumer is a consumers/<name> entry as far as it is checked here: the
// server's SnapshotConsumerState, {"config":{…},"state":{…}}, both present.
// The server's restore checks their fields.
type snapConsumer struct {
	Config jsonKind `json:"config"`
	State  jsonKind `json:"state"`
}

// newSnapDecoder decodes the snapshot read from r.
func newSnapDecoder(r io.Reader) *snapDecoder {
	return newPlainSnapDecoder(s2.NewReader(r))
}

// newPlainSnapDecoder decodes the snapshot's archive read, s2-decoded
// already, from plain.
func newPlainSnapDecoder(plain io.Reader) *snapDecoder {
	return &snapDecoder{r: newArcReader(plain), after: "no entries"}
}

// next decodes the next entry. After itemEnd it returns io.EOF; after an
// error it returns that error again. An *entryTooLarge is a head entry over
// its bound.
func (d *snapDecoder) next() (snapItem, error) {
	if d.err != nil {
		return 0, d.err
	}
	if d.phase == phaseDone {
		return 0, io.EOF
	}
	it, err := d.step()
	if err != nil {
		d.err = err
	}
	return it, err
}

func (d *snapDecoder) step() (snapItem, error) {
	hdr, err := d.r.next()
	d.hdr = hdr
	if err != nil {
		if d.phase == phaseState {
			return 0, fmt.Errorf("not a NATS Server 2.15 stream snapshot: %w", err)
		}
		return 0, fmt.Errorf("the snapshot ends before its end-of-backup sentinel, after %s: %w", d.last(), err)
	}
	switch d.phase {
	case phaseState:
		return d.decodeState(hdr)
	case phaseConsumers:
		return d.decodeConsumer(hdr)
	default:
		return d.decodeMessage(hdr)
	}
}

// last is what was decoded last, for errors.
func (d *snapDecoder) last() string {
	if d.afterMsg != 0 {
		return fmt.Sprintf("message %d", d.afterMsg)
	}
	return d.after
}

func (d *snapDecoder) decodeState(hdr *arcHeader) (snapItem, error) {
	if string(hdr.Name) != "state.json" {
		return 0, fmt.Errorf("the snapshot begins with %q, not state.json", printable(string(hdr.Name)))
	}
	b, err := d.readEntry(hdr, maxStateEntry, "state.json")
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(b, &d.state); err != nil {
		return 0, fmt.Errorf("state.json does not decode: %w", err)
	}
	if d.state.Consumers < 0 {
		return 0, fmt.Errorf("state.json gives a negative consumer count (%d)", d.state.Consumers)
	}
	d.consumersLeft = d.state.Consumers
	d.lastSeq = d.state.FirstSeq - 1 // a first sequence of 0 wraps: no message can follow
	d.phase = phaseMessages
	if d.consumersLeft > 0 {
		d.phase = phaseConsumers
	}
	d.after = "state.json"
	return itemState, nil
}

func (d *snapDecoder) decodeConsumer(hdr *arcHeader) (snapItem, error) {
	name, ok := strings.CutPrefix(string(hdr.Name), "consumers/")
	if !ok {
		return 0, fmt.Errorf("expected a consumer entry (%d of %d still to come), found %q", d.consumersLeft, d.state.Consumers, printable(string(hdr.Name)))
	}
	what := fmt.Sprintf("consumer entry %q", printable(string(hdr.Name)))
	b, err := d.readEntry(hdr, maxConsumerEntry, what)
	if err != nil {
		return 0, err
	}
	if d.consumer != nil {
		// It decodes the entry, and checks it as below, in one pass.
		if err := d.consumer(name, b); err != nil {
			return 0, fmt.Errorf("consumer %q: %w", printable(name), err)
		}
	} else {
		var c snapConsumer
		if err := json.Unmarshal(b, &c); err != nil {
			return 0, fmt.Errorf("consumer %q does not decode: %w", printable(name), err)
		}
		if c.Config != '{' {
			return 0, fmt.Errorf("consumer %q has no config", printable(name))
		}
		if c.State != '{' {
			return 0, fmt.Errorf("consumer %q has no state", printable(name))
		}
	}
	d.consumersLeft--
	if d.consumersLeft == 0 {
		d.phase = phaseMessages
	}
	d.after = "consumer " + printable(name)
	return itemConsumer, nil
}

func (d *snapDecoder) decodeMessage(hdr *arcHeader) (snapItem, error) {
	if hdr.Sequence == 0 {
		if hdr.Timestamp == 0 && hdr.HeaderSize == 0 && hdr.PayloadSize == 0 {
			d.phase = phaseDone
			return itemEnd, nil
		}
		return 0, fmt.Errorf("expected a message, found entry %q with sequence 0 after %s", printable(string(hdr.Name)), d.last())
	}
	if hdr.Sequence <= d.lastSeq {
		if d.lastSeq == math.MaxUint64 {
			return 0, fmt.Errorf("message sequence %d cannot follow state.json's first sequence of 0", hdr.Sequence)
		}
		return 0, fmt.Errorf("message sequence %d is out of order after %s", hdr.Sequence, d.last())
	}
	d.lastSeq, d.seq, d.afterMsg = hdr.Sequence, hdr.Sequence, hdr.Sequence
	return itemMessage, nil
}

// readEntry reads the current entry whole, refusing one whose declared size
// is over bound before reading it. The bytes are valid until the next call.
// The buffer grows with what arrives, not with what is declared.
func (d *snapDecoder) readEntry(hdr *arcHeader, bound int64, what string) ([]byte, error) {
	n := hdr.HeaderSize + hdr.PayloadSize // the archive reader keeps both and their sum non-negative
	if n > bound {
		return nil, &entryTooLarge{what: what, n: n, bound: bound}
	}
	b := d.buf[:0]
	for int64(len(b)) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(min(n-int64(len(b)), int64(max(len(b), 4<<10)))))
		}
		m, err := d.r.Read(b[len(b):min(int64(cap(b)), n)])
		b = b[:len(b)+m]
		if err != nil {
			d.buf = b
			return nil, fmt.Errorf("reading %s: %w", what, err)
		}
	}
	d.buf = b
	return b, nil
}
