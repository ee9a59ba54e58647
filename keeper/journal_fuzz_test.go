package keeper

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeJournal feeds journal heads, as the index holds them (outside
// input), to decodeJournal: it never panics, a reference to a body that it
// takes holds together, and what it decodes encodes back to a head that
// decodes the same.
func FuzzDecodeJournal(f *testing.F) {
	pos := []Position{{Stream: "S", Consumer: "billing-c", AckFloor: 4, Config: json.RawMessage(`{"durable_name":"billing-c"}`)}}
	exp := []ConsumerFigures{{Stream: "S", Consumer: "billing-c", By: MoveReset, WantFloor: 4, WantConfig: strings.Repeat("a", 64)}}
	old := &journal{Module: "billing", Local: "ledger", Aside: "billing.ledger.20260101T000000", Point: "points/billing/ledger/f1-x",
		Remove: []string{"KV_billing_ledger"}, Removed: []string{}, Restore: []string{"KV_billing_ledger"}, Restored: []string{},
		Reposition: pos, Expect: exp, Step: StepRemove}
	f.Add(encodeHead(old))
	ref, _, err := splitBody(old)
	if err != nil {
		f.Fatal(err)
	}
	now := *old
	now.body = ref
	f.Add(encodeHead(&now))
	f.Add([]byte(`{"module":"m","local":"l","reposition":{"parts":2,"bytes":262145,"sha256":"` + strings.Repeat("0", 64) + `"}}`))
	f.Add([]byte(`{"module":"m","local":"l","reposition":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var j journal
		if err := decodeJournal(data, &j); err != nil {
			return
		}
		if j.body != nil {
			if err := j.body.check(); err != nil {
				t.Fatalf("took a reference that does not hold together: %v", err)
			}
			if !j.bodyAway {
				t.Fatal("a head that names parts says its body is here")
			}
		}
		again := encodeHead(&j)
		var k journal
		if err := decodeJournal(again, &k); err != nil {
			t.Fatalf("the head it encodes does not decode: %v\n%s", err, again)
		}
		if !bytes.Equal(encodeHead(&k), again) {
			t.Fatalf("a head does not decode the same:\n%s\n%s", again, encodeHead(&k))
		}
	})
}
