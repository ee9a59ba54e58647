package keeper_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// queueSpy says which way each act went through an ActsQueue (a
// fault.Queue) in front of the real recorder; with away set, it takes no
// act now (Record fails) and queues the rest.
type queueSpy struct {
	mu     sync.Mutex
	away   bool
	now    []keeper.Act // through Record
	queued []keeper.Act // through Queue
}

// wrap puts q in front of c's acts.
func (q *queueSpy) wrap(c *keeper.Config) {
	f := &fault.Queue{Queued: func(ctx context.Context, a keeper.Act) error {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.queued = append(q.queued, a)
		return nil
	}}
	f.WrapActs(c)
	f.OnRecord(func(ctx context.Context, a keeper.Act, next fault.RecordFunc) error {
		q.mu.Lock()
		q.now = append(q.now, a)
		away := q.away
		q.mu.Unlock()
		if away {
			return errors.New("the bus takes no act now")
		}
		return next(ctx, a)
	})
}

// With an ActsQueue, a verb's closing act is queued and an intent before
// a removal (discard-aside, prune-kept) is recorded now: while the bus
// takes no act, the discard and the prune are refused and remove nothing,
// though the snapshot and restore before them succeeded. Every act has an
// id of its own.
func TestIntentsAreRecordedNowOtherActsQueued(t *testing.T) {
	var spy *queueSpy
	e := newEnv(t, func(c *keeper.Config) {
		spy = &queueSpy{}
		spy.wrap(c)
	})
	e.snapshot(1, "a")
	e.snapshot(1, "b")
	spy.mu.Lock()
	spy.away = true
	spy.mu.Unlock()
	rep, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: module, Local: local, AsideOnly: true, Caller: "t", Why: "w"})
	if err != nil {
		t.Fatalf("a restore while the bus takes no act: %v", err)
	}
	if _, err := e.k.DiscardAside(e.ctx, keeper.Request{From: rep.Aside.ID, Caller: "ops", Why: "done"}); !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("discard while its intent cannot be recorded: %v, want a failure", err)
	}
	if _, err := e.k.PruneKept(e.ctx, keeper.Request{Module: module, Local: local, Policy: &keeper.Policy{KeepLast: 1}, Caller: "t", Why: "w"}); !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("prune while its intent cannot be recorded: %v, want a failure", err)
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Points) != 2 || len(list.Asides) != 1 {
		t.Fatalf("after the refused discard and prune: %d points, %d asides; want 2 and 1", len(list.Points), len(list.Asides))
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	for _, a := range spy.now {
		if a.Outcome != "intent" {
			t.Errorf("an act with outcome %q was recorded now, not queued: %s", a.Outcome, a.What)
		}
	}
	if len(spy.now) != 2 {
		t.Errorf("%d intents recorded now, want 2 (the discard's, the prune's first)", len(spy.now))
	}
	ids := map[string]bool{}
	for _, a := range append(spy.now, spy.queued...) {
		if a.ID == "" || len(a.ID) > keeper.MaxActID || ids[a.ID] {
			t.Errorf("act %q (%s): empty, too long or not its own", a.ID, a.What)
		}
		ids[a.ID] = true
		if a.Outcome == "intent" && slices.ContainsFunc(spy.queued, func(q keeper.Act) bool { return q.ID == a.ID }) {
			t.Errorf("an intent was queued: %s", a.What)
		}
	}
	if len(spy.queued) < 3 {
		t.Errorf("%d acts queued, want the two snapshots' and the restore's at least", len(spy.queued))
	}
}
