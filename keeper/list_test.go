package keeper_test

import (
	"slices"
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
