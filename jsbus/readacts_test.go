package jsbus_test

import (
	"encoding/json"
	"testing"

	"github.com/nats-keeper/nats-keeper/jsbus"
)

// FuzzDecodeAct: an acts stream message is outside input (whoever may
// publish to the acts subjects). Decoding never panics, and what decodes
// names a verb and encodes again.
func FuzzDecodeAct(f *testing.F) {
	f.Add([]byte(`{"id":"a","verb":"snapshot-kept","module":"billing","local":"ledger","what":"w","outcome":"done","time":"2026-12-01T18:00:00Z"}`))
	f.Add([]byte(`{"verb":""}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"verb":"x","detail":{"a":[1,2,{}]},"time":"bad"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := jsbus.DecodeAct(b)
		if err != nil {
			return
		}
		if a.Verb == "" {
			t.Fatal("an act without a verb decoded")
		}
		if _, err := json.Marshal(a); err != nil {
			t.Fatalf("a decoded act does not encode: %v", err)
		}
	})
}
