package keeper_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestPruneKeepsWhatThePolicySays: points taken on several days; the dry run
// lists each point with keep or remove and why, and the real prune removes
// exactly those it listed for removal, whole, leaving the asides.
func TestPruneKeepsWhatThePolicySays(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, func(c *keeper.Config) { c.Now = func() time.Time { return now } })
	for i, fp := range []string{"d1", "d2", "d3", "d4", "d5"} {
		now = time.Date(2026, 11, 20+i, 12, 0, 0, 0, time.UTC)
		r := req(1, fp)
		if fp == "d2" {
			r.KeepFor = keeper.Duration(30 * 24 * time.Hour)
		}
		if _, err := e.k.SnapshotKept(e.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	e.change()
	if _, err := e.k.RestoreKept(e.ctx, req(1, "d5")); err != nil { // an aside, which prune never removes
		t.Fatal(err)
	}
	if _, err := e.k.PruneKept(e.ctx, keeper.Request{Module: module, Local: local, Caller: "t", Why: "no policy"}); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("prune with no policy anywhere: got %v, want 400", err)
	}
	policy := &keeper.Policy{KeepLast: 2}
	dry, err := e.k.PruneKept(e.ctx, keeper.Request{Module: module, Local: local, Policy: policy, DryRun: true, Caller: "t", Why: "test"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"d5": true, "d4": true, "d3": false, "d2": true, "d1": false}
	for _, d := range dry.Pruned {
		if want[d.Point.Fingerprint] != d.Keep {
			t.Errorf("dry run: %s keep=%v (%v), want %v", d.Point.Fingerprint, d.Keep, d.Reasons, want[d.Point.Fingerprint])
		}
	}
	if len(dry.Pruned) != 5 {
		t.Fatalf("dry run lists %d points, want 5", len(dry.Pruned))
	}
	for _, fp := range []string{"d1", "d3"} {
		if _, err := os.Stat(filepath.Join(e.dir, "points", module, local, "f1-"+fp, "point.json")); err != nil {
			t.Fatalf("the dry run removed %s: %v", fp, err)
		}
	}
	// A recorded policy is applied when the request names none.
	if err := e.k.SetPolicy(e.ctx, module, local, *policy); err != nil {
		t.Fatal(err)
	}
	real, err := e.k.PruneKept(e.ctx, keeper.Request{Module: module, Local: local, Caller: "t", Why: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range real.Pruned {
		if d.Keep != dry.Pruned[i].Keep || d.Point.Fingerprint != dry.Pruned[i].Point.Fingerprint {
			t.Errorf("the prune's list differs from the dry run's at %d: %+v vs %+v", i, d, dry.Pruned[i])
		}
	}
	for fp, keep := range want {
		_, err := os.Stat(filepath.Join(e.dir, "points", module, local, "f1-"+fp))
		if keep != (err == nil) {
			t.Errorf("after the prune, point %s there=%v, want %v", fp, err == nil, keep)
		}
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module})
	if err != nil || len(list.Points) != 3 || len(list.Asides) != 1 {
		t.Fatalf("after the prune: %d points and %d asides listed (%v), want 3 and 1", len(list.Points), len(list.Asides), err)
	}
}
