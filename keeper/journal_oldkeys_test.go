package keeper

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"testing"
	"time"
)

// The head (of the older shape, its positions held inline) and the body of
// the journal of TestJournalAsBefore, as the release before (8fe6673)
// wrote them.
var (
	//go:embed testdata/journal-head-before.json
	journalHeadBefore []byte
	//go:embed testdata/journal-body-before.json
	journalBodyBefore []byte
)

// TestJournalAsBefore: the restore journal's format does not change with
// the wire casing: its head and body are written byte for byte as the
// release before wrote them (old keys only, a consumer's configuration as
// it is), and read back as the journal written.
func TestJournalAsBefore(t *testing.T) {
	f := uint64(3)
	j := &journal{Module: "m", Local: "l", Aside: "m.l.20261206T000000", Point: "points/m/l/f1-x", Remove: []string{"S"}, Removed: []string{}, Restore: []string{"S"}, Restored: []string{},
		Reposition: []Position{{Stream: "S", Consumer: "c", AckFloor: 7, Config: json.RawMessage(`{"durable_name":"c","metadata":{"ack-floor":"1","ack_floor":"1"}}`)}},
		Kind:       "replace", Step: "remove", Started: time.Unix(1, 0).UTC(), WrittenBy: "v",
		Evidence: &Evidence{Verdict: "FAIL", Module: "m", Local: "l", PointSum: "s", Checks: []Check{{Name: "point-verified", Verdict: "PASS", Archive: &ArchiveFigures{BytesChecked: 2}}}},
		Expect:   []ConsumerFigures{{Stream: "S", Consumer: "c", WantFloor: 7, GotFloor: &f, WantConfig: "w", GotConfig: "g"}}}
	head := encodeHead(j)
	if !bytes.Equal(head, journalHeadBefore) {
		t.Errorf("the journal's head is\n%s\nthe release before wrote\n%s", head, journalHeadBefore)
	}
	_, parts, err := splitBody(j)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || !bytes.Equal(parts[0], journalBodyBefore) {
		t.Errorf("the journal's body is\n%s\nthe release before wrote\n%s", bytes.Join(parts, nil), journalBodyBefore)
	}
	var back journal
	if err := decodeJournal(head, &back); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(struct {
		P []Position
		E []ConsumerFigures
		V *Evidence
	}{back.Reposition, back.Expect, back.Evidence})
	b, _ := json.Marshal(struct {
		P []Position
		E []ConsumerFigures
		V *Evidence
	}{j.Reposition, j.Expect, j.Evidence})
	if !bytes.Equal(a, b) {
		t.Errorf("the journal reads back as\n%s\nwant\n%s", a, b)
	}
}
