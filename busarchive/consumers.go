package busarchive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// SnapshotConsumer is a durable consumer as a stream's snapshot holds it,
// in the shape the bus lists consumers in (keeper.Position).
type SnapshotConsumer struct {
	Name string
	// Config is the consumer's configuration as the server wrote it.
	Config json.RawMessage
	// AckFloor is the stream sequence below which the consumer is done:
	// its ack floor, or, with nothing pending, the last it was delivered.
	AckFloor uint64
}

// MaxSnapshotConsumers bounds the consumers ReadSnapshotConsumers takes
// from one snapshot (a stream's consumer limit is the server's business;
// this keeps the keeper's memory bounded whatever the snapshot says).
const MaxSnapshotConsumers = 100_000

// ReadSnapshotConsumers reads the start of a stream's snapshot
// (stream.arc.s2) from r, its state and its consumers' entries, and
// returns its durable consumers in the order it holds them. It reads no
// further than the first entry after the consumers; the rest of r is left
// unread. The entries are checked as the snapshot's decoder checks them.
func ReadSnapshotConsumers(r io.Reader) ([]SnapshotConsumer, error) {
	d := newSnapDecoder(r)
	var out []SnapshotConsumer
	d.consumer = func(name string, entry []byte) error {
		c, durable, err := snapshotConsumer(name, entry)
		if err != nil || !durable {
			return err
		}
		if len(out) == MaxSnapshotConsumers {
			return fmt.Errorf("the snapshot holds more than %d durable consumers", MaxSnapshotConsumers)
		}
		out = append(out, c)
		return nil
	}
	for d.phase == phaseState || d.phase == phaseConsumers {
		if _, err := d.next(); err != nil {
			return nil, fmt.Errorf("the snapshot's consumers do not decode: %w", err)
		}
	}
	return out, nil
}

// snapConsumerState is what is read of a consumer entry's state (the
// server's ConsumerState): the positions.
type snapConsumerState struct {
	Delivered struct {
		Stream uint64 `json:"stream_seq"`
	} `json:"delivered"`
	AckFloor struct {
		Stream uint64 `json:"stream_seq"`
	} `json:"ack_floor"`
	Pending anyPending `json:"pending"`
}

// anyPending records whether a state's pending map has an entry, building
// nothing of it.
type anyPending bool

func (p *anyPending) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*p = anyPending(len(b) > 2 && b[0] == '{' && len(bytes.TrimSpace(b[1:len(b)-1])) > 0)
	return nil
}

// snapshotConsumer decodes and checks one consumer entry; durable is false
// for a consumer without a durable name. The entry is checked to be JSON
// once, then split into its config and state without decoding the config
// (which is most of it, and is kept as it is).
func snapshotConsumer(name string, entry []byte) (SnapshotConsumer, bool, error) {
	if !json.Valid(entry) {
		return SnapshotConsumer{}, false, fmt.Errorf("it does not decode as JSON")
	}
	cfg, state := objectMembers(entry, "config", "state")
	if len(cfg) == 0 || cfg[0] != '{' {
		return SnapshotConsumer{}, false, fmt.Errorf("it has no config")
	}
	if len(state) == 0 || state[0] != '{' {
		return SnapshotConsumer{}, false, fmt.Errorf("it has no state")
	}
	var st snapConsumerState
	if err := json.Unmarshal(state, &st); err != nil {
		return SnapshotConsumer{}, false, fmt.Errorf("its state: %w", err)
	}
	if !durableConfig(cfg) || !ValidStreamName(name) {
		return SnapshotConsumer{}, false, nil // as the bus's list leaves them out
	}
	floor := st.AckFloor.Stream
	if !st.Pending {
		floor = max(floor, st.Delivered.Stream)
	}
	return SnapshotConsumer{Name: name, Config: bytes.Clone(cfg), AckFloor: floor}, true, nil
}

// objectMembers returns the values of the members a and b of the JSON
// object doc, as they are written (nil for one it does not have; the last,
// for one it has twice). doc must be valid JSON.
func objectMembers(doc []byte, a, b string) (va, vb []byte) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, nil
	}
	for i++; ; {
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] != '"' {
			return va, vb
		}
		end := skipValue(doc, i)
		key := doc[i:end]
		i = skipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return va, vb
		}
		i = skipSpace(doc, i+1)
		end = skipValue(doc, i)
		switch string(key) {
		case `"` + a + `"`:
			va = doc[i:end]
		case `"` + b + `"`:
			vb = doc[i:end]
		}
		i = skipSpace(doc, end)
		if i >= len(doc) || doc[i] != ',' {
			return va, vb
		}
		i++
	}
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns where the valid JSON value at doc[i] ends. A key with
// an escape is compared as written, so it matches no plain name.
func skipValue(doc []byte, i int) int {
	depth, inString := 0, false
	for ; i < len(doc); i++ {
		c := doc[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
				if depth == 0 {
					return i + 1
				}
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return i
		}
	}
	return i
}

// durableConfig reports whether a consumer's configuration names it
// durable; the server writes durable_name first when it has one.
func durableConfig(cfg []byte) bool {
	const first = `{"durable_name":"`
	if bytes.HasPrefix(cfg, []byte(first)) {
		return len(cfg) > len(first) && cfg[len(first)] != '"'
	}
	if !bytes.Contains(cfg, []byte(`"durable_name"`)) {
		return false
	}
	var c struct {
		Durable string `json:"durable_name"`
	}
	return json.Unmarshal(cfg, &c) == nil && c.Durable != ""
}
