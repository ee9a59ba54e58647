package outbox

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// FuzzDecodeEntry: a queue file is outside input on a restart. Decoding
// never panics, and what decodes is an act that encodes to a file that
// decodes to the same act.
func FuzzDecodeEntry(f *testing.F) {
	good, err := encodeEntry(keeper.Act{ID: keeper.NewActID(), Verb: "snapshot-kept", Module: "billing", Local: "ledger",
		What: "took a point", Outcome: "done", Time: time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC), Detail: json.RawMessage(`{"said":"x"}`)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":1,"act":{"id":"a","verb":"v","what":"","outcome":"","time":"2026-12-01T18:00:00Z"}}`))
	f.Add([]byte(`{"format":2,"act":{}}`))
	f.Add([]byte(`{"format":1,"act":{"id":"a b"}}{}`))
	f.Add([]byte(`{"format":1,"act":{"id":"a","verb":"v","time":"2026-12-01T18:00:00Z","detail":[1,2]},"extra":1}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeEntry(b)
		if err != nil {
			return
		}
		again, err := encodeEntry(a)
		if err != nil {
			t.Fatalf("a decoded act does not encode: %v (%+v)", err, a)
		}
		b2, err := decodeEntry(again)
		if err != nil {
			t.Fatalf("a re-encoded act does not decode: %v", err)
		}
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b2)
		if string(x) != string(y) {
			t.Fatalf("round trip changed the act:\n%s\n%s", x, y)
		}
	})
}

// The queue file's name: 20 digits and .act, a sequence above 0.
func TestParseName(t *testing.T) {
	for name, want := range map[string]bool{
		entryName(1): true, entryName(1 << 62): true, "00000000000000000000.act": false, "1.act": false,
		"0000000000000000000a.act": false, "00000000000000000001.act.damaged": false, ".tmp-00000000000000000001.act": false,
		"99999999999999999999.act": false, // over uint64
	} {
		if _, ok := parseName(name); ok != want {
			t.Errorf("parseName(%q) = %v, want %v", name, ok, want)
		}
	}
}
