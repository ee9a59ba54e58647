package keeper_test

import (
	"fmt"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestRebuildIndexFromFiles: the files are the truth. With the index's
// records gone (and a stale one added), Rebuild writes back every point and
// aside on disk and removes the record without files.
func TestRebuildIndexFromFiles(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	e.change()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"point.", "aside."} {
		keys, err := e.bus.Keys(e.ctx, prefix)
		if err != nil || len(keys) != 1 {
			t.Fatalf("%s keys before: %v %v", prefix, keys, err)
		}
		if err := e.bus.Delete(e.ctx, keys[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.bus.Put(e.ctx, "point.ghost.data.1.gone", []byte(`{"module":"ghost"}`)); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.k.ListKept(e.ctx, keeper.Request{Module: module}); len(list.Points)+len(list.Asides) != 0 {
		t.Fatalf("the index still lists %d points and %d asides", len(list.Points), len(list.Asides))
	}

	written, removed, err := e.k.Rebuild(e.ctx)
	if err != nil || written != 2 || removed != 1 {
		t.Fatalf("rebuild: wrote %d, removed %d, %v; want 2, 1", written, removed, err)
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{})
	if err != nil || len(list.Points) != 1 || len(list.Asides) != 1 {
		t.Fatalf("after rebuild: %v %+v", err, list)
	}
	if list.Asides[0].ID != rep.Aside.ID || list.Points[0].Fingerprint != "fp" {
		t.Fatalf("after rebuild: aside %s point %s", list.Asides[0].ID, list.Points[0].Fingerprint)
	}
	if w, r, err := e.k.Rebuild(e.ctx); err != nil || w != 0 || r != 0 {
		t.Fatalf("a second rebuild changed %d/%d records: %v", w, r, err)
	}
}

// TestPlanWinsOverNamingRule: a recorded plan names the kept data's streams.
func TestPlanWinsOverNamingRule(t *testing.T) {
	e := newEnv(t)
	if _, err := e.k.SetPlan(e.ctx, keeper.Request{Module: module, Local: local, Streams: []string{e.names.Stream}}); err != nil {
		t.Fatal(err)
	}
	rep := e.snapshot(1, "planned")
	if len(rep.Point.Streams) != 1 || rep.Point.Streams[0].Name != e.names.Stream {
		t.Fatalf("the point holds %+v, want only %s", rep.Point.Streams, e.names.Stream)
	}
	if _, err := e.k.SetPlan(e.ctx, keeper.Request{Module: module, Local: local, Streams: []string{"a.b"}}); err == nil {
		t.Fatal("a plan naming an invalid stream was recorded")
	}
}

// TestRebuildReadsTheIndexInBatches: with 40 points in the store and the
// index, a rebuild that changes nothing reads their records in batches, not
// with a request each (it asked 40 at start-up before, which took a
// keeper with 10,000 points some 0.5 s of the bus's round trips).
func TestRebuildReadsTheIndexInBatches(t *testing.T) {
	e := newEnv(t)
	for i := range 40 {
		e.snapshot(1, fmt.Sprintf("fp%02d", i))
	}
	watch := natstest.Connect(t, e.srv)
	sub, err := watch.SubscribeSync("$JS.API.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	if w, r, err := e.k.Rebuild(e.ctx); err != nil || w != 0 || r != 0 {
		t.Fatalf("a rebuild of an index in line with the store changed %d/%d records: %v", w, r, err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := sub.Pending(); n > 10 {
		t.Errorf("the rebuild of 40 points sent %d API requests, want a few batches", n)
	}
}
