package keeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestListShowsTotalsAndWaitingAsides: list-kept sums the points and
// asides of each kept data and of all, and flags an aside older than the
// warning age, which waits for a person.
func TestListShowsTotalsAndWaitingAsides(t *testing.T) {
	var now time.Time
	e := newEnv(t, func(c *keeper.Config) {
		c.Now = func() time.Time {
			if now.IsZero() {
				return time.Now()
			}
			return now
		}
		c.AsideWarnAfter = 7 * 24 * time.Hour
	})
	p1 := e.snapshot(1, "a").Point
	p2 := e.snapshot(2, "b").Point
	e.change()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "a"))
	if err != nil {
		t.Fatal(err)
	}
	aside := rep.Aside
	list, err := e.k.ListKept(e.ctx, keeper.Request{})
	if err != nil {
		t.Fatal(err)
	}
	want := keeper.KeptTotal{Module: module, Local: local, Points: 2, PointBytes: p1.ArchiveSize + p2.ArchiveSize,
		Asides: 1, AsideBytes: aside.ArchiveSize}
	if len(list.Totals) != 1 || list.Totals[0] != want {
		t.Fatalf("totals %+v, want %+v", list.Totals, want)
	}
	if list.TotalBytes != want.PointBytes+want.AsideBytes {
		t.Errorf("total bytes %d, want %d", list.TotalBytes, want.PointBytes+want.AsideBytes)
	}
	if len(list.Waiting) != 0 {
		t.Errorf("a new aside is flagged: %v", list.Waiting)
	}
	now = time.Now().Add(8 * 24 * time.Hour)
	list, err = e.k.ListKept(e.ctx, keeper.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(list.Waiting, []string{aside.ID}) {
		t.Fatalf("waiting %v, want the aside %s", list.Waiting, aside.ID)
	}
	mustContain(t, list.Said, "older than 7d0h", aside.ID, "wait for a person")
}

// list-kept gives pages in index-key order (asides, then points): each
// record once, Next the cursor of the next page and "" on the last, Total
// all of them; a reply bound cuts a page short by bytes; a record removed
// between pages is not listed; and MergeList of the pages is the
// listing in one.
func TestListKeptPages(t *testing.T) {
	e := newEnv(t)
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.bus.Put(e.ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 3 {
		id := fmt.Sprintf("m.l.20260101T00000%d", i)
		put("aside."+id, keeper.Aside{ID: id, Module: "m", Local: "l", Reason: "restore", Dir: "aside/" + id, ArchiveSize: 1, Taken: time.Now()})
		want = append(want, "aside:"+id)
	}
	for i := range 22 {
		local := fmt.Sprintf("l%02d", i)
		put("point.m."+local+".1.f", keeper.Point{Module: "m", Local: local, Form: 1, Fingerprint: "f", Dir: "points/m/" + local + "/f1-f", ArchiveSize: 10})
		want = append(want, "point:"+local)
	}
	names := func(r *keeper.Reply) []string {
		var out []string
		for _, a := range r.Asides {
			out = append(out, "aside:"+a.ID)
		}
		for _, p := range r.Points {
			out = append(out, "point:"+p.Local)
		}
		return out
	}
	page := func(ctx context.Context, r keeper.Request) []*keeper.Reply {
		var pages []*keeper.Reply
		for range 100 {
			rep, err := e.k.ListKept(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Total != len(want) {
				t.Fatalf("page %d says %d in all, want %d", len(pages)+1, rep.Total, len(want))
			}
			pages = append(pages, rep)
			if rep.Next == "" {
				return pages
			}
			r.After = rep.Next
		}
		t.Fatal("list-kept never gave its last page")
		return nil
	}
	pages := page(e.ctx, keeper.Request{Module: "m", Limit: 10})
	if len(pages) != 3 {
		t.Fatalf("%d pages of 10 for %d records, want 3", len(pages), len(want))
	}
	var got []string
	for _, p := range pages {
		got = append(got, names(p)...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages listed %v, want %v", got, want)
	}
	mustContain(t, pages[0].Said, "25 restore point(s) and set-aside copy(ies) of m in all", "this page holds 7 restore point(s) and 3 set-aside copy(ies)", "after")
	merged := keeper.MergeList("m", pages)
	whole, err := e.k.ListKept(e.ctx, keeper.Request{Module: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if whole.Next != "" || !slices.Equal(names(whole), want) || merged.TotalBytes != whole.TotalBytes || merged.Said != whole.Said ||
		!slices.Equal(merged.Totals, whole.Totals) {
		t.Errorf("joined pages %q %d %v; the whole listing %q %d %v", merged.Said, merged.TotalBytes, merged.Totals, whole.Said, whole.TotalBytes, whole.Totals)
	}

	// A bound of 2 KiB fits a few records a page; every one still comes once.
	small := page(keeper.WithReplyBound(e.ctx, 2<<10), keeper.Request{Module: "m"})
	got = nil
	for _, p := range small {
		if len(p.Points)+len(p.Asides) > 6 {
			t.Errorf("a page under a 2 KiB bound holds %d records", len(p.Points)+len(p.Asides))
		}
		got = append(got, names(p)...)
	}
	if len(small) < 5 || !slices.Equal(got, want) {
		t.Errorf("%d pages under a 2 KiB bound listed %v", len(small), got)
	}

	// A record removed between two pages is not listed.
	first, err := e.k.ListKept(e.ctx, keeper.Request{Module: "m", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.bus.Delete(e.ctx, "point.m.l02.1.f"); err != nil {
		t.Fatal(err)
	}
	second, err := e.k.ListKept(e.ctx, keeper.Request{Module: "m", Limit: 5, After: first.Next})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(second); slices.Contains(got, "point:l02") || len(got) != 5 || second.Total != len(want)-1 {
		t.Errorf("the page after a removal listed %v, %d in all", got, second.Total)
	}
}

// list-kept refuses a limit or cursor it did not give, and other verbs
// refuse them at all.
func TestListKeptRefusesBadPages(t *testing.T) {
	for _, c := range []struct {
		verb string
		r    keeper.Request
	}{
		{keeper.VerbList, keeper.Request{Limit: -1}},
		{keeper.VerbList, keeper.Request{Limit: keeper.MaxListLimit + 1}},
		{keeper.VerbList, keeper.Request{After: "plan.m.l"}},
		{keeper.VerbList, keeper.Request{After: "point.m l"}},
		{keeper.VerbList, keeper.Request{After: "point." + strings.Repeat("x", 600)}},
		{keeper.VerbSnapshot, keeper.Request{Module: "m", Local: "l", Fingerprint: "f", Limit: 3}},
	} {
		if err := keeper.CheckRequest(c.verb, c.r); !errors.Is(err, keeper.ErrBadRequest) {
			t.Errorf("%s %+v: %v, want a bad request", c.verb, c.r, err)
		}
	}
	if err := keeper.CheckRequest(keeper.VerbList, keeper.Request{Limit: 10, After: "point.m.l.1.f"}); err != nil {
		t.Errorf("a good page was refused: %v", err)
	}
}

// FuzzCheckCursor: a cursor is outside input; whatever it is, the check
// never panics, and what it accepts is an index key of a point or aside of
// bounded length, safe in a subject: printable ASCII without a space or a
// wildcard.
func FuzzCheckCursor(f *testing.F) {
	for _, s := range []string{"", "point.m.l.1.f", "aside.m.l.20260101T000000", "point.", "plan.x", "point.a b", "point.>", "point.\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if keeper.CheckCursor(s) != nil || s == "" {
			return
		}
		printable := !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '*' || r == '>' })
		if len(s) > 512 || (!strings.HasPrefix(s, "point.") && !strings.HasPrefix(s, "aside.")) || !printable {
			t.Fatalf("accepted %q", s)
		}
	})
}
