package busarchive

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/jsm.go/backup"
	"github.com/nats-io/nats-server/v2/server/archive"
)

// The snapshot decoder must find what jsm.go v0.5.1's backup decoder, which
// Verify used before, finds: the same entries, in the same order, and an
// error at the same entry. Test files only import jsm.go; the package does
// not.

// arcEntry is one NATSARC1 entry of a test snapshot.
type arcEntry struct {
	name          string
	ts            int64
	seq           uint64
	hdrLen, plLen int64 // declared; the payload written is hdrLen+plLen bytes of body, cut or padded
	body          string
}

// arcBytes renders entries as an uncompressed NATSARC1 stream.
func arcBytes(t testing.TB, entries ...arcEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := archive.NewWriter(&buf)
	for _, e := range entries {
		if err := w.WriteHeader(&archive.Header{Name: e.name, Timestamp: e.ts, Sequence: e.seq, HeaderSize: e.hdrLen, PayloadSize: e.plLen}); err != nil {
			t.Fatal(err)
		}
		body := []byte(e.body)
		n := int(e.hdrLen + e.plLen)
		if len(body) < n {
			body = append(body, bytes.Repeat([]byte{'x'}, n-len(body))...)
		}
		if _, err := w.Write(body[:n]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func compress(b []byte) []byte {
	var buf bytes.Buffer
	w := s2.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func jsonEntry(name, body string) arcEntry {
	return arcEntry{name: name, ts: 1, plLen: int64(len(body)), body: body}
}

func stateEntry(first, last, msgs uint64, consumers int) arcEntry {
	return jsonEntry("state.json", fmt.Sprintf(`{"messages":%d,"bytes":%d,"first_seq":%d,"first_ts":"2026-01-02T03:04:05Z","last_seq":%d,"last_ts":"0001-01-01T00:00:00Z","consumer_count":%d}`, msgs, 40*msgs, first, last, consumers))
}

func consumerEntry(name string) arcEntry {
	return jsonEntry("consumers/"+name, `{"config":{"durable_name":"`+name+`","ack_policy":"explicit"},"state":{"delivered":{"consumer_seq":1,"stream_seq":2},"ack_floor":{"consumer_seq":1,"stream_seq":2}}}`)
}

func msgEntry(seq uint64) arcEntry {
	return arcEntry{name: fmt.Sprintf("s.%d", seq), ts: int64(seq), seq: seq, hdrLen: 12, plLen: 20, body: "NATS/1.0\r\n\r\n"}
}

var endEntry = arcEntry{}

// decodeOurs and decodeJSM list what each decoder finds in the s2 stream b,
// and the error that stopped it (nil at the sentinel).
func decodeOurs(b []byte) ([]string, error) {
	var out []string
	d := newSnapDecoder(bytes.NewReader(b))
	for {
		it, err := d.next()
		if err != nil {
			return out, err
		}
		switch it {
		case itemState:
			s := d.state
			out = append(out, fmt.Sprintf("state %d-%d %d msgs %d bytes %d consumers", s.FirstSeq, s.LastSeq, s.Msgs, s.Bytes, s.Consumers))
		case itemConsumer:
			out = append(out, "consumer")
		case itemMessage:
			out = append(out, fmt.Sprintf("message %d", d.seq))
		case itemEnd:
			return append(out, "end"), nil
		}
	}
}

func decodeJSM(b []byte) ([]string, error) {
	var out []string
	d := backup.NewDecoder(bytes.NewReader(b))
	for {
		it, err := d.Next()
		if err != nil {
			return out, err
		}
		switch it := it.(type) {
		case *backup.State:
			s := it.State
			out = append(out, fmt.Sprintf("state %d-%d %d msgs %d bytes %d consumers", s.FirstSeq, s.LastSeq, s.Msgs, s.Bytes, s.Consumers))
		case *backup.Consumer:
			out = append(out, "consumer")
		case *backup.Message:
			out = append(out, fmt.Sprintf("message %d", it.Seq))
		case backup.End:
			return append(out, "end"), nil
		}
	}
}

// agree fails unless both decoders find the same in the s2 stream b. The
// one known difference: jsm.go decodes a consumer entry's config and state
// into the server's types, so a field of the wrong type there stops it; the
// decoder here checks only that both are objects and leaves their fields to
// the server's restore. It reports whether the comparison went to the end.
func agree(t *testing.T, b []byte) bool {
	t.Helper()
	ours, oerr := decodeOurs(b)
	theirs, terr := decodeJSM(b)
	var big *entryTooLarge
	if errors.As(oerr, &big) {
		// jsm.go's decoder has no bounds (Verify checked them apart before
		// it ran): it must find the same up to that entry.
		if len(theirs) < len(ours) || strings.Join(theirs[:len(ours)], "\n") != strings.Join(ours, "\n") {
			t.Fatalf("over a bound after %q; jsm.go found %q (%v)", ours, theirs, terr)
		}
		return true
	}
	if terr != nil && strings.Contains(terr.Error(), "failed to decode consumer") && len(ours) > len(theirs) && ours[len(theirs)] == "consumer" {
		if strings.Join(theirs, "\n") != strings.Join(ours[:len(theirs)], "\n") {
			t.Fatalf("found %q (%v); jsm.go %q (%v)", ours, oerr, theirs, terr)
		}
		return false
	}
	if strings.Join(ours, "\n") != strings.Join(theirs, "\n") || (oerr == nil) != (terr == nil) {
		t.Fatalf("found:\n  %s\n  error %v\njsm.go found:\n  %s\n  error %v", strings.Join(ours, "\n  "), oerr, strings.Join(theirs, "\n  "), terr)
	}
	return true
}

func snapCases(t testing.TB) map[string][]byte {
	msgs := func(seqs ...uint64) []arcEntry {
		var out []arcEntry
		for _, s := range seqs {
			out = append(out, msgEntry(s))
		}
		return out
	}
	join := func(parts ...any) []byte {
		var es []arcEntry
		for _, p := range parts {
			switch p := p.(type) {
			case arcEntry:
				es = append(es, p)
			case []arcEntry:
				es = append(es, p...)
			}
		}
		return arcBytes(t, es...)
	}
	return map[string][]byte{
		"whole":                join(stateEntry(1, 5, 5, 2), consumerEntry("a"), consumerEntry("b"), msgs(1, 2, 3, 4, 5), endEntry),
		"no consumers":         join(stateEntry(3, 9, 3, 0), msgs(3, 7, 9), endEntry),
		"empty stream":         join(stateEntry(1, 0, 0, 0), endEntry),
		"advanced empty":       join(stateEntry(101, 100, 0, 0), endEntry),
		"no sentinel":          join(stateEntry(1, 3, 3, 0), msgs(1, 2, 3)),
		"nothing":              nil,
		"only state":           join(stateEntry(1, 3, 3, 0)),
		"first not state":      join(consumerEntry("a"), stateEntry(1, 1, 1, 0), msgs(1), endEntry),
		"state bad JSON":       join(jsonEntry("state.json", `{"messages":`), endEntry),
		"state wrong type":     join(jsonEntry("state.json", `{"messages":"five"}`), endEntry),
		"state bad time":       join(jsonEntry("state.json", `{"first_ts":12}`), endEntry),
		"state lost":           join(jsonEntry("state.json", `{"first_seq":1,"last_seq":2,"lost":{"msgs":[1],"bytes":3}}`), msgs(2), endEntry),
		"state lost wrong":     join(jsonEntry("state.json", `{"lost":{"msgs":"x"}}`), endEntry),
		"state trailing":       join(jsonEntry("state.json", `{} {}`), endEntry),
		"state null":           join(jsonEntry("state.json", `null`), endEntry),
		"state in upper case":  join(jsonEntry("state.json", `{"FIRST_SEQ":4,"Last_Seq":4,"MESSAGES":1}`), msgs(4), endEntry),
		"negative consumers":   join(jsonEntry("state.json", `{"consumer_count":-1}`), endEntry),
		"first seq 0":          join(stateEntry(0, 3, 3, 0), msgs(1), endEntry),
		"first seq 0, empty":   join(stateEntry(0, 0, 0, 0), endEntry),
		"out of order":         join(stateEntry(1, 5, 3, 0), msgs(1, 3, 2), endEntry),
		"repeated":             join(stateEntry(1, 5, 3, 0), msgs(1, 3, 3), endEntry),
		"before first":         join(stateEntry(5, 9, 3, 0), msgs(4, 5), endEntry),
		"seq 0 not sentinel":   join(stateEntry(1, 5, 3, 0), msgs(1), arcEntry{name: "x", ts: 5}, endEntry),
		"sentinel with a name": join(stateEntry(1, 1, 1, 0), msgs(1), arcEntry{name: "x"}),
		"entries after end":    join(stateEntry(1, 1, 1, 0), msgs(1), endEntry, msgs(5), stateEntry(1, 1, 1, 0)),
		"fewer consumers":      join(stateEntry(1, 1, 1, 2), consumerEntry("a"), msgs(1), endEntry),
		"more consumers":       join(stateEntry(1, 1, 1, 1), consumerEntry("a"), consumerEntry("b"), msgs(1), endEntry),
		"consumer not object":  join(stateEntry(1, 1, 1, 1), jsonEntry("consumers/a", `[1]`), endEntry),
		"consumer null":        join(stateEntry(1, 1, 1, 1), jsonEntry("consumers/a", `null`), endEntry),
		"consumer no config":   join(stateEntry(1, 1, 1, 1), jsonEntry("consumers/a", `{"state":{}}`), endEntry),
		"consumer null config": join(stateEntry(1, 1, 1, 1), jsonEntry("consumers/a", `{"config":null,"state":{}}`), endEntry),
		"consumer no state":    join(stateEntry(1, 1, 1, 1), jsonEntry("consumers/a", `{"config":{}}`), endEntry),
		"consumer bad JSON":    join(stateEntry(1, 1, 1, 1), jsonEntry("consumers/a", `{"config":{},"state":{}`), endEntry),
		"consumer upper case":  join(stateEntry(1, 1, 1, 1), jsonEntry("consumers/a", `{"CONFIG":{},"State":{}}`), msgs(1), endEntry),
		"consumer empty name":  join(stateEntry(1, 1, 1, 1), jsonEntry("consumers/", `{"config":{},"state":{}}`), msgs(1), endEntry),
		"header only message":  join(stateEntry(1, 1, 1, 0), arcEntry{name: "s", seq: 1, hdrLen: 12, body: "NATS/1.0\r\n\r\n"}, endEntry),
		"empty message":        join(stateEntry(1, 1, 1, 0), arcEntry{name: "s", seq: 1}, endEntry),
		"state too large":      join(jsonEntry("state.json", `{"x":"`+strings.Repeat("y", maxStateEntry)+`"}`), endEntry),
		"consumer too large":   join(stateEntry(1, 1, 1, 2), consumerEntry("a"), jsonEntry("consumers/b", `{"config":{},"state":{},"x":"`+strings.Repeat("y", maxConsumerEntry)+`"}`), endEntry),
	}
}

func TestSnapDecoderAgreesWithJSM(t *testing.T) {
	for name, b := range snapCases(t) {
		t.Run(name, func(t *testing.T) {
			whole := compress(b)
			if !agree(t, whole) {
				t.Fatal("the decoders differ where they are known to")
			}
			// Cut anywhere: both find the same up to the cut.
			for cut := 0; cut < len(whole); cut += max(1, len(whole)/50) {
				agree(t, whole[:cut])
			}
			// Not s2: both refuse it.
			agree(t, b)
		})
	}
}

// The one known difference, shown: a consumer field of the wrong type.
func TestSnapDecoderLeavesConsumerFieldsToTheServer(t *testing.T) {
	b := compress(arcBytes(t, stateEntry(1, 1, 1, 1), jsonEntry("consumers/a", `{"config":{"ack_policy":"sometimes"},"state":{}}`), msgEntry(1), endEntry))
	ours, oerr := decodeOurs(b)
	_, terr := decodeJSM(b)
	if oerr != nil || len(ours) != 4 || terr == nil {
		t.Fatalf("found %q (%v); jsm.go: %v", ours, oerr, terr)
	}
}

// FuzzSnapDecoder checks the decoder against jsm.go's on arbitrary snapshots:
// b[0] odd, b[1:] is the s2 stream itself; even, b[1:] is the NATSARC1
// archive, compressed here so that mutations reach the decoder.
//
//	go test ./busarchive -run '^$' -fuzz FuzzSnapDecoder -fuzztime 60s -fuzzminimizetime 3s
func FuzzSnapDecoder(f *testing.F) {
	for _, b := range snapCases(f) {
		if len(b) < 1<<20 {
			f.Add(append([]byte{0}, b...))
		}
	}
	f.Add(append([]byte{1}, compress(snapCases(f)["whole"])...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) > 1<<20 {
			return
		}
		s := b[1:]
		if b[0]%2 == 0 {
			s = compress(s)
		}
		agree(t, s)
	})
}
