package keeper

import (
	"encoding/json"
	"strings"
	"testing"
)

// A journal with delta streams is of format 2 (a keeper before it refuses
// it rather than carry it on as a full restore), and its streams, the
// configuration to set back among them, read back as written.
func TestDeltaJournalRoundTrip(t *testing.T) {
	cfg := json.RawMessage(`{"name":"billing_ledger","subjects":["billing.ledger.>"],"max_age":0,"description":"x"}`)
	j := &journal{Module: "billing", Local: "ledger", Aside: "billing.ledger.20260101T000000", Point: "points/billing/ledger/f1-fp",
		Step: StepDelta, Delta: []deltaStream{{Stream: "billing_ledger", PointFirst: 1, PointLast: 50, PointMsgs: 49, PointBytes: 7188,
			TailFrom: 51, TailTo: 75, TailCount: 25, Config: cfg, Deleted: true}}}
	head := encodeHead(j)
	if !strings.Contains(string(head), `"format":2`) {
		t.Fatalf("a delta journal's head is not of format 2: %s", head)
	}
	var got journal
	if err := decodeJournal(head, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Delta) != 1 || got.Delta[0].TailTo != 75 || !got.Delta[0].Deleted || got.Delta[0].ConfigSet {
		t.Fatalf("read back: %+v", got.Delta)
	}
	var a, b any
	if json.Unmarshal(cfg, &a) != nil || json.Unmarshal(got.Delta[0].Config, &b) != nil || !jsonEqual(a, b) {
		t.Fatalf("the configuration read back is %s, not %s", got.Delta[0].Config, cfg)
	}
	if plain := encodeHead(&journal{Module: "billing", Local: "ledger"}); !strings.Contains(string(plain), `"format":1`) {
		t.Fatalf("a journal without delta streams is not of format 1: %s", plain)
	}
}

// tailSeqs skips the deleted sequences and stops at its bound.
func TestTailSeqs(t *testing.T) {
	got := tailSeqs(5, 20, []uint64{1, 6, 7, 12, 30}, 6)
	want := []uint64{5, 8, 9, 10, 11, 13}
	if len(got) != len(want) {
		t.Fatalf("tailSeqs: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tailSeqs: %v, want %v", got, want)
		}
	}
	if got := tailSeqs(5, 4, nil, 10); len(got) != 0 {
		t.Fatalf("an empty range: %v", got)
	}
}

// configBack: fields an update sets back are listed and the point's
// configuration is what the update sends, with the live replicas and
// placement; fields it cannot set back refuse delta, with why.
func TestConfigBack(t *testing.T) {
	point := json.RawMessage(`{"name":"s","subjects":["a.>"],"storage":"file","max_msgs":-1,"replicas":3,"compression":"none","metadata":{"_nats.ver":"2.14"}}`)
	live := json.RawMessage(`{"name":"s","subjects":["a.>","b.>"],"storage":"file","max_msgs":10,"replicas":1,"metadata":{"_nats.ver":"2.15"}}`)
	changed, back, err := configBack(point, live)
	if err != nil || strings.Join(changed, ",") != "max_msgs,subjects" {
		t.Fatalf("changed %v, %v", changed, err)
	}
	var m map[string]any
	if err := json.Unmarshal(back, &m); err != nil || m["replicas"] != float64(1) || m["max_msgs"] != float64(-1) {
		t.Fatalf("the configuration set back: %s (%v)", back, err)
	}
	if c, b, err := configBack(point, point); err != nil || c != nil || b != nil {
		t.Fatalf("the same configuration: %v %s %v", c, b, err)
	}
	for _, l := range []string{`{"name":"s","storage":"memory"}`, `{"name":"s","storage":"file","deny_delete":true}`, `{"name":"s","storage":"file","sealed":true}`} {
		if _, _, err := configBack(point, json.RawMessage(l)); err == nil {
			t.Errorf("live %s: delta not refused", l)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// FuzzConfigBack: any two configurations (the point's and the live one,
// both read from outside) are compared without a panic; what it sets back
// is a JSON object, and the fields it names differ.
func FuzzConfigBack(f *testing.F) {
	f.Add([]byte(`{"name":"s","max_msgs":-1}`), []byte(`{"name":"s","max_msgs":10}`))
	f.Add([]byte(`{"name":"s"}`), []byte(`{"name":"s","deny_delete":true}`))
	f.Add([]byte(`null`), []byte(`[]`))
	f.Add([]byte(`{"metadata":{"_nats.x":"1"}}`), []byte(`{"metadata":{}}`))
	f.Fuzz(func(t *testing.T, point, live []byte) {
		changed, back, err := configBack(point, live)
		if err != nil {
			if changed != nil || back != nil {
				t.Fatalf("refused with %v, yet gives %v %s", err, changed, back)
			}
			return
		}
		if (back == nil) != (len(changed) == 0) {
			t.Fatalf("changed %v with configuration %s", changed, back)
		}
		if back != nil {
			var m map[string]json.RawMessage
			if json.Unmarshal(back, &m) != nil || m == nil {
				t.Fatalf("sets back %s, not a JSON object", back)
			}
		}
	})
}
