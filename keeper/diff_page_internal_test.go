package keeper

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A page shows its first entry whatever its size, and stops at the first
// list over its bytes: the next cursor resumes right after the last entry
// shown, and the lists after it show nothing and are marked cut.
func TestFitPageMovesOn(t *testing.T) {
	big := "+" + strings.Repeat("k", 500)
	ds := []streamDiff{
		{Change: kept.StreamChange{Stream: "KV_a", AppendedSeqs: []string{"1-3"}, Keys: &kept.KeyChanges{Added: 2, Names: []string{big, "+z"}}}},
		{Change: kept.StreamChange{Stream: "S", AppendedSeqs: []string{"7"}}},
	}
	next := fitPage(ds, 100)
	if next != "KV_a/keys/" {
		t.Fatalf("next %q, want KV_a/keys/ (the keys from their start)", next)
	}
	if !slices.Equal(ds[0].Change.AppendedSeqs, []string{"1-3"}) || len(ds[0].Change.Keys.Names) != 0 || !ds[0].Change.Keys.Cut || len(ds[1].Change.AppendedSeqs) != 0 || !ds[1].Change.SeqsCut {
		t.Fatalf("page %+v %+v %+v", ds[0].Change, ds[0].Change.Keys, ds[1].Change)
	}
	ds[0].Change.AppendedSeqs, ds[0].Change.Keys.Names, ds[0].cut = nil, []string{big, "+z"}, [4]bool{}
	ds[1].Change.AppendedSeqs, ds[1].cut = []string{"7"}, [4]bool{}
	if next := fitPage(ds, 100); next == "" || !strings.HasPrefix(next, "KV_a/keys/") || len(ds[0].Change.Keys.Names) != 1 {
		t.Fatalf("a page whose first entry is over its bytes: next %q, names %d", next, len(ds[0].Change.Keys.Names))
	}
}
