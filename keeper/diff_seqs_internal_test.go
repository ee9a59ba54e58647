package keeper

import (
	"slices"
	"testing"
)

// The counts of a point's stream (first, last, msgs) against live
// sequences, and the ranges named: appended after the point's last,
// removed from the point's messages (its own gaps being no removal).
func TestCountSeqs(t *testing.T) {
	for _, c := range []struct {
		name                string
		first, last, msgs   uint64
		live                liveSeqs
		appended, removed   uint64
		extra               uint64
		appendedR, removedR []string
	}{
		{"unchanged", 1, 10, 10, liveSeqs{1, 10, nil}, 0, 0, 0, nil, nil},
		{"appended", 1, 10, 10, liveSeqs{1, 15, []uint64{12}}, 4, 0, 0, []string{"11", "13-15"}, nil},
		{"deleted inside", 1, 10, 10, liveSeqs{1, 10, []uint64{3, 4, 8}}, 0, 3, 0, nil, []string{"3-4", "8"}},
		{"limits from the front", 1, 10, 10, liveSeqs{6, 12, nil}, 2, 5, 0, []string{"11-12"}, []string{"1-5"}},
		{"the point's own gap", 1, 10, 9, liveSeqs{1, 10, []uint64{5}}, 0, 0, 0, nil, nil},
		{"all gone", 1, 10, 10, liveSeqs{11, 10, nil}, 0, 10, 0, nil, []string{"1-10"}},
		{"made again", 5, 10, 6, liveSeqs{1, 3, nil}, 0, 6, 3, nil, []string{"5-10"}},
		{"an empty point", 11, 10, 0, liveSeqs{11, 12, nil}, 2, 0, 0, []string{"11-12"}, nil},
		{"no stream", 1, 4, 4, liveSeqs{}, 0, 4, 0, nil, []string{"1-4"}},
	} {
		got := countSeqs(c.first, c.last, c.msgs, c.live)
		if got.appended != c.appended || got.removed != c.removed || got.extra != c.extra {
			t.Errorf("%s: %+v, want appended %d removed %d extra %d", c.name, got, c.appended, c.removed, c.extra)
		}
		a := &rangeList{limit: 10}
		appendedRanges(c.last, c.live, a)
		r := &rangeList{limit: 10}
		if got.gaps == 0 {
			removedRanges(c.first, c.last, c.live, r)
		}
		if !slices.Equal(a.strings(), c.appendedR) && len(a.ranges)+len(c.appendedR) > 0 {
			t.Errorf("%s: appended %v, want %v", c.name, a.strings(), c.appendedR)
		}
		if !slices.Equal(r.strings(), c.removedR) && len(r.ranges)+len(c.removedR) > 0 {
			t.Errorf("%s: removed %v, want %v", c.name, r.strings(), c.removedR)
		}
	}
	r := &rangeList{after: 4, limit: 2}
	for _, x := range [][2]uint64{{1, 3}, {4, 6}, {7, 7}, {9, 9}, {11, 12}} {
		r.add(x[0], x[1])
	}
	if !slices.Equal(r.strings(), []string{"5-7", "9"}) || !r.cut {
		t.Errorf("after 4, limit 2: %v cut %v", r.strings(), r.cut)
	}
}
