package keeper

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
)

// evidenceBefore is evidence.json as the release before (8fe6673) wrote
// the evidence of TestEvidenceJSONAsBefore, with recordJSON.
//
//go:embed testdata/evidence-before.json
var evidenceBefore []byte

// TestEvidenceJSONAsBefore: evidence.json is written as the release before
// wrote it, byte for byte: that release reads it back (show-evidence) with
// DisallowUnknownFields, so a new key in it makes every report written
// since an upgrade unreadable after a downgrade. This release reads it
// back as the evidence it wrote.
func TestEvidenceJSONAsBefore(t *testing.T) {
	f, n, c := uint64(3), uint64(4), uint64(5)
	ev := &Evidence{Verdict: "FAIL", Failed: []string{"consumers-set"}, Module: "m", Local: "l", Kind: "replace", Point: "points/m/l/f1-x", PointSum: "sum<&>", Dir: "aside/m.l.20261206T000000",
		Started: time.Unix(1, 0).UTC(), Ended: time.Unix(2, 0).UTC(), Said: "one check failed",
		Checks: []Check{
			{Name: "point-verified", Verdict: "PASS", Said: "s", Archive: &ArchiveFigures{Size: 1, Sum: "x", BytesChecked: 2, Streams: 1, How: "h"}},
			{Name: "kv-keys", Verdict: "PASS", Said: "s", Streams: []StreamFigures{{Stream: "KV_b", Verdict: "PASS",
				Want: &StreamCount{Messages: 1, Bytes: 2, FirstSeq: 3, LastSeq: 4}, Got: &StreamCount{Messages: 1, Bytes: 2, FirstSeq: 3, LastSeq: 4},
				Count: &SubjectFigures{Want: 1, Got: 1, Objects: &n, Chunks: &c}}}},
			{Name: "consumers-set", Verdict: "FAIL", Said: "s", Omitted: 2, Consumers: []ConsumerFigures{{Stream: "S", Consumer: "c", By: "x", Verdict: "FAIL", WantFloor: 3, GotFloor: &f, WantConfig: "w", GotConfig: "g", Note: "n"}}}},
		Steps: []StepTime{{Step: "verify", Started: time.Unix(1, 0).UTC(), Ended: time.Unix(2, 0).UTC(), Seconds: 1}}}
	data, err := evidenceJSON(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := layout.RecordJSON(data) // as putJSON writes it
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, evidenceBefore) {
		t.Fatalf("evidence.json is\n%s\nthe release before wrote\n%s", got, evidenceBefore)
	}
	back, err := DecodeEvidence(got)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(back)
	b, _ := json.Marshal(ev)
	if !bytes.Equal(a, b) {
		t.Fatalf("evidence.json reads back as\n%s\nwant\n%s", a, b)
	}
}
