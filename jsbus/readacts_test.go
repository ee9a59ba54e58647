package jsbus_test

import (
	"encoding/json"
	"testing"

	"github.com/nats-keeper/nats-keeper/jsbus"
)

// FuzzDecodeAct: an acts stream message is outside input (whoever may
// publish to the acts subjects). Decoding never panics, and what decodes
// names a verb, encodes again, and decodes from that to the same act.
func FuzzDecodeAct(f *testing.F) {
	f.Add([]byte(`{"id":"a","verb":"snapshot-kept","module":"billing","local":"ledger","what":"w","outcome":"done","time":"2026-12-01T18:00:00Z"}`))
	f.Add([]byte(`{"verb":""}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"verb":"x","detail":{"a":[1,2,{}]},"time":"bad"}`))
	f.Add([]byte(`{"verb":"x","detail":null,"time":"2026-12-01T19:00:00.5+01:00","hand":true}`))
	f.Add([]byte(`{"verb":"x","detail" : { "a" : "\u00e9" } , "Module":"m"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := jsbus.DecodeAct(b)
		if err != nil {
			return
		}
		if a.Verb == "" {
			t.Fatal("an act without a verb decoded")
		}
		again, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("a decoded act does not encode: %v", err)
		}
		b2, err := jsbus.DecodeAct(again)
		if err != nil {
			t.Fatalf("a re-encoded act does not decode: %v\n%s", err, again)
		}
		if y, _ := json.Marshal(b2); string(y) != string(again) {
			t.Fatalf("round trip changed the act:\n%s\n%s", again, y)
		}
	})
}
