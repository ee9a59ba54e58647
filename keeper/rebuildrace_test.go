package keeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// indexHook runs a hook once, through a fault.Bus in front of a keeper's
// index, before the first Keys whose prefix begins with keys (another
// keeper's verb then runs after a rebuild read the store and before it
// reads the index), before the first Create of a key that begins with
// create, or at the first GetRev of a key that begins with getRev: before
// it reads, or with afterRead right after.
type indexHook struct {
	keys, create, getRev string
	afterRead            bool
	once                 sync.Once
	hook                 func()
}

// wrap puts h in front of c's index.
func (h *indexHook) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.WrapIndex(c)
	f.OnGetRev(func(ctx context.Context, key string, next fault.GetRevFunc) ([]byte, uint64, error) {
		hooked := h.getRev != "" && strings.HasPrefix(key, h.getRev)
		if hooked && !h.afterRead {
			h.once.Do(h.hook)
		}
		v, rev, err := next(ctx, key)
		if hooked && h.afterRead {
			h.once.Do(h.hook)
		}
		return v, rev, err
	})
	f.OnKeys(func(ctx context.Context, prefix string, next fault.KeysFunc) ([]string, error) {
		if h.keys != "" && strings.HasPrefix(prefix, h.keys) {
			h.once.Do(h.hook)
		}
		return next(ctx, prefix)
	})
	f.OnCreate(func(ctx context.Context, key string, value []byte, next fault.CreateKeyFunc) (uint64, error) {
		if h.create != "" && strings.HasPrefix(key, h.create) {
			h.once.Do(h.hook)
		}
		return next(ctx, key, value)
	})
}

// rebuilder opens a keeper beside e.k, on its store, bus and index, as a
// second keeper starting would; hook runs once as its rebuild lists the
// index's point records, after it read the store.
func (e *env) rebuilder(hook func()) *keeper.Keeper {
	return e.rebuilderOn(&indexHook{keys: "point.", hook: hook})
}

// rebuilderOn is rebuilder with the hook ix in front of its index.
func (e *env) rebuilderOn(ix *indexHook) *keeper.Keeper {
	e.t.Helper()
	k, err := e.keeperOn(e.dir, ix.wrap)
	if err != nil {
		e.t.Fatal(err)
	}
	return k
}

// TestRebuildKeepsAPointCommittedDuringIt: a keeper starting beside another
// read the store; the other then commits a point (point.json, then its
// index record) before the rebuild reads the index. The rebuild must not
// take the new record for one without files: the point stays in the
// index, restorable. (It used to be removed: "written=0 removed=1".)
func TestRebuildKeepsAPointCommittedDuringIt(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "before")
	var during *keeper.Reply
	k := e.rebuilder(func() { during = e.snapshot(1, "during") })
	written, removed, err := k.Rebuild(e.ctx)
	if err != nil || removed != 0 || written != 0 {
		t.Fatalf("rebuild: wrote %d, removed %d, %v; want 0, 0", written, removed, err)
	}
	if during == nil {
		t.Fatal("the hook did not run: no point was committed during the rebuild")
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil || len(list.Points) != 2 {
		t.Fatalf("after rebuild the index lists %+v (%v), want the points before and during", list, err)
	}
	e.change()
	if _, err := k.RestoreKept(e.ctx, req(1, "during")); err != nil {
		t.Fatalf("restore of the point committed during the rebuild: %v", err)
	}
}

// TestRebuildWritesBackNoPrunedPoint: the other keeper prunes a point after
// the rebuild read it from the store. The rebuild must not write its record
// back: a record without files would be listed, and refused at restore.
func TestRebuildWritesBackNoPrunedPoint(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "old")
	e.snapshot(1, "new")
	var pruned int
	k := e.rebuilder(func() {
		rep, err := e.k.PruneKept(e.ctx, keeper.Request{Module: module, Local: local, Policy: &keeper.Policy{KeepLast: 1},
			Caller: "t", Why: "prune during a rebuild"})
		if err != nil {
			t.Errorf("prune: %v", err)
			return
		}
		for _, d := range rep.Pruned {
			if !d.Keep {
				pruned++
			}
		}
	})
	written, removed, err := k.Rebuild(e.ctx)
	if err != nil || written != 0 || removed != 0 || pruned != 1 {
		t.Fatalf("rebuild: wrote %d, removed %d, %v (pruned %d); want 0, 0 (1)", written, removed, err, pruned)
	}
	if _, err := e.bus.Get(e.ctx, "point."+module+"."+local+".1.old"); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("the pruned point's record is back in the index: %v", err)
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil || len(list.Points) != 1 || list.Points[0].Fingerprint != "new" {
		t.Fatalf("after rebuild the index lists %+v (%v), want only the newest point", list, err)
	}
}

// TestRebuildWritesBackNoDiscardedAside: the same for an aside discarded by
// the other keeper after the rebuild read it.
func TestRebuildWritesBackNoDiscardedAside(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	e.change()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatal(err)
	}
	k := e.rebuilder(func() {
		if _, err := e.k.DiscardAside(e.ctx, keeper.Request{From: rep.Aside.ID, Caller: "t", Why: "discard during a rebuild"}); err != nil {
			t.Errorf("discard: %v", err)
		}
	})
	written, removed, err := k.Rebuild(e.ctx)
	if err != nil || written != 0 || removed != 0 {
		t.Fatalf("rebuild: wrote %d, removed %d, %v; want 0, 0", written, removed, err)
	}
	if _, err := e.bus.Get(e.ctx, "aside."+rep.Aside.ID); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("the discarded aside's record is back in the index: %v", err)
	}
}

// TestRebuildTakesBackARecordWhoseFilesWentAsItWrote: the rebuild finds an
// aside's record missing and the aside in the store, looks again and writes
// the record; between that look and the write the other keeper discards the
// aside (its files, then its record, already missing). The record written
// must not outlive the files: the rebuild looks a second time and takes it
// back.
func TestRebuildTakesBackARecordWhoseFilesWentAsItWrote(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	e.change()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatal(err)
	}
	key := "aside." + rep.Aside.ID
	if err := e.bus.Delete(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	discarded := false
	k := e.rebuilderOn(&indexHook{create: "aside.", hook: func() {
		_, err := e.k.DiscardAside(e.ctx, keeper.Request{From: rep.Aside.ID, Caller: "t", Why: "discard as a rebuild writes"})
		if err != nil {
			t.Errorf("discard: %v", err)
		}
		discarded = err == nil
	}})
	written, removed, err := k.Rebuild(e.ctx)
	if err != nil || written != 0 || removed != 0 || !discarded {
		t.Fatalf("rebuild: wrote %d, removed %d, %v (discarded %v); want 0, 0 (true)", written, removed, err, discarded)
	}
	if _, err := e.bus.Get(e.ctx, key); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("the discarded aside's record stands in the index: %v", err)
	}
}

// TestRebuildWritesNoStaleRecordOverANewerOne: the rebuild finds a point's
// record other than the store's and sets out to write it; as it reads the
// record's revision (just before, and just after), the other keeper takes
// the point again (same form and fingerprint: the earlier one is set
// aside) and records it. The rebuild must not put the replaced point's
// record over the new one, whichever of the store and the index it read
// first.
func TestRebuildWritesNoStaleRecordOverANewerOne(t *testing.T) {
	for _, afterRead := range []bool{false, true} {
		t.Run(fmt.Sprintf("afterRead=%v", afterRead), func(t *testing.T) { staleOverNewer(t, afterRead) })
	}
}

func staleOverNewer(t *testing.T, afterRead bool) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	key := "point." + module + "." + local + ".1.fp"
	if err := e.bus.Put(e.ctx, key, []byte(`{"module":"billing","local":"ledger","form":1,"fingerprint":"fp","why":"stale"}`)); err != nil {
		t.Fatal(err)
	}
	var again *keeper.Reply
	k := e.rebuilderOn(&indexHook{getRev: key, afterRead: afterRead, hook: func() { again = e.snapshot(1, "fp") }})
	if _, _, err := k.Rebuild(e.ctx); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if again == nil {
		t.Fatal("the hook did not run: the point was not taken again during the rebuild")
	}
	data, err := e.bus.Get(e.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var rec keeper.Point
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if !rec.Taken.Equal(again.Point.Taken) || rec.ArchiveSum != again.Point.ArchiveSum {
		t.Fatalf("the index records the point taken at %s (sum %s); the store holds the one taken again at %s (sum %s)",
			rec.Taken, rec.ArchiveSum, again.Point.Taken, again.Point.ArchiveSum)
	}
}
