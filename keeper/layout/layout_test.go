package layout

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestKeys pins the keys a keeper has always written: points and asides
// already in stores are found by them.
func TestKeys(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{PointRel("billing", "ledger", 2, "3f9a"), "points/billing/ledger/f2-3f9a"},
		{AsideRel("billing.ledger.20260101T000000Z"), "aside/billing.ledger.20260101T000000Z"},
		{ArchiveKey("points/billing/ledger/f2-3f9a"), "points/billing/ledger/f2-3f9a/bus.tar"},
		{SealedKey("points/billing/ledger/f2-3f9a"), "points/billing/ledger/f2-3f9a/bus.tar.age"},
		{RecordKey("points/billing/ledger/f2-3f9a"), "points/billing/ledger/f2-3f9a/point.json"},
		{RecordKey("aside/x"), "aside/x/aside.json"},
		{PlanKey("billing", "ledger"), "plan.billing.ledger"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for rel, want := range map[string]bool{
		"points/billing/ledger/f2-3f9a": true, "aside/x": true,
		"points/billing/ledger": false, "aside/x/y": false, "other/a/b/c": false, "asides/x": false,
	} {
		if IsRecordPlace(rel) != want {
			t.Errorf("IsRecordPlace(%q) = %v, want %v", rel, !want, want)
		}
	}
	if !IsAsideRel("aside/x") || IsAsideRel("points/a/b/f1-x") || IsAsideRel("asidex/y") {
		t.Error("IsAsideRel tells an aside's prefix wrongly")
	}
}

// TestRecordJSONShape: a small record is indented by two spaces, a big one
// compact; each ends in a newline.
func TestRecordJSONShape(t *testing.T) {
	small, err := RecordJSON(map[string]any{"a": 1, "b": []int{2}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}\n"; string(small) != want {
		t.Errorf("small record %q, want %q", small, want)
	}
	big, err := RecordJSON(map[string]string{"a": strings.Repeat("x", IndentBelow)})
	if err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(map[string]string{"a": strings.Repeat("x", IndentBelow)})
	if !bytes.Equal(big, append(compact, '\n')) {
		t.Errorf("a record over IndentBelow is not its compact JSON and a newline")
	}
}

// TestAppendFieldIsMarshal: a member added last gives the bytes
// json.Marshal gives of the whole, with other members or without.
func TestAppendFieldIsMarshal(t *testing.T) {
	type rec struct {
		Name      string `json:"name,omitempty"`
		Positions []int  `json:"positions,omitempty"`
	}
	for _, r := range []rec{{Name: "n", Positions: []int{1, 2}}, {Positions: []int{3}}} {
		want, _ := json.Marshal(r)
		rest, _ := json.Marshal(rec{Name: r.Name})
		raw, _ := json.Marshal(r.Positions)
		got, err := AppendField("a record", rest, "positions", raw)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendField = %s, %v; want %s", got, err, want)
		}
	}
	if _, err := AppendField("a point's record", []byte("[]"), "positions", []byte("[]")); err == nil ||
		err.Error() != `a point's record encoded as "[]"` {
		t.Errorf("AppendField of a non-object: %v", err)
	}
	ahead := EncodeAhead([]int{1, 2})
	if data, err := ahead(); err != nil || string(data) != "[1,2]" {
		t.Errorf("EncodeAhead = %s, %v", data, err)
	}
}

// TestRecordBounds: the positions' bound is what the record leaves them.
func TestRecordBounds(t *testing.T) {
	if MaxPositionsSize != 4<<20-512<<10 {
		t.Errorf("MaxPositionsSize = %d", MaxPositionsSize)
	}
}
