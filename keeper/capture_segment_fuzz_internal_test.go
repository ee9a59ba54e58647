package keeper

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeSegment: a segment record read from the store is taken only
// when it is the segment its place says and its ranges can be; one taken
// encodes and decodes to itself, and nothing panics.
func FuzzDecodeSegment(f *testing.F) {
	const rel = "capture/billing/ledger/f1-capture-20261206T100000Z"
	began := time.Date(2026, 12, 6, 10, 0, 1, 0, time.UTC)
	good := segment{Chain: rel, Base: "points/billing/ledger/f1-capture-20261206T100000Z", N: 3, Began: began, Reached: began,
		Closed: began.Add(time.Second), Streams: []segmentStream{{Name: "billing_ledger", From: 11, To: 20, Messages: 9, Unseen: 1,
			Through: 20, StreamFirst: 2, Deleted: [][2]uint64{{3, 4}, {12, 12}}}}}
	data, err := json.Marshal(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, "s000000000003")
	f.Add(data, "s000000000004")
	f.Add([]byte(`{"chain":"`+rel+`","n":1,"streams":[{"name":"x","from":5,"to":3,"through":9}]}`), "s000000000001")
	f.Add([]byte(`{"chain":"`+rel+`","n":1,"streams":[{"name":"x","from":1,"to":9,"through":9,"deleted":[[5,3]]}]}`), "s000000000001")
	f.Fuzz(func(t *testing.T, data []byte, dir string) {
		seg, err := decodeSegment(data, rel, dir)
		if err != nil {
			return
		}
		for _, ss := range seg.Streams {
			if ss.To > ss.Through || ss.To+1 < ss.From {
				t.Fatalf("a segment was taken with the range %d..%d of a stream at %d", ss.From, ss.To, ss.Through)
			}
		}
		again, err := json.Marshal(seg)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeSegment(again, rel, dir)
		if err != nil {
			t.Fatalf("a segment taken does not decode again: %v\n%s", err, again)
		}
		if b, _ := json.Marshal(back); string(b) != string(again) {
			t.Fatalf("a segment does not decode to itself:\n%s\n%s", again, b)
		}
	})
}

// TestDecodeSegment: the record of a segment is refused, saying why, when
// it lies in another place than its own or its ranges cannot be.
func TestDecodeSegment(t *testing.T) {
	const rel = "capture/billing/ledger/f1-capture-20261206T100000Z"
	began := time.Date(2026, 12, 6, 10, 0, 1, 0, time.UTC)
	record := func(edit func(*segment)) []byte {
		s := segment{Chain: rel, N: 2, Began: began, Reached: began, Closed: began.Add(time.Second),
			Streams: []segmentStream{{Name: "billing_ledger", From: 11, To: 20, Messages: 10, Through: 20, Deleted: [][2]uint64{{3, 4}}}}}
		edit(&s)
		data, _ := json.Marshal(s)
		return data
	}
	if _, err := decodeSegment(record(func(*segment) {}), rel, "s000000000002"); err != nil {
		t.Fatalf("a good record was refused: %v", err)
	}
	for _, tc := range []struct {
		name, dir string
		edit      func(*segment)
		want      string
	}{
		{"another place", "s000000000003", func(*segment) {}, "the record says it is segment 2 of " + rel + ", not 3 of " + rel},
		{"no segment directory", "s2", func(*segment) {}, `"s2" is not the directory of a segment (s and twelve digits)`},
		{"past the stream", "s000000000002", func(s *segment) { s.Streams[0].To = 21 }, `stream "billing_ledger": its range 11..21 does not fit the stream's last sequence 20`},
		{"too many messages", "s000000000002", func(s *segment) { s.Streams[0].Messages = 11 }, `stream "billing_ledger": 11 messages and 0 unseen in 10 sequences`},
		{"deletes out of order", "s000000000002", func(s *segment) { s.Streams[0].Deleted = [][2]uint64{{5, 6}, {3, 4}} },
			`stream "billing_ledger": the deleted range 3..4 is not up to its range's end 20, in order`},
		{"reached after it began", "s000000000002", func(s *segment) { s.Reached = began.Add(time.Minute) }, "out of order"},
	} {
		_, err := decodeSegment(record(tc.edit), rel, tc.dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}
