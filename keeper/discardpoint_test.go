package keeper_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// pointSpy records every act and, for discard-point's intent, whether the
// point's point.json was still in the store when the act was recorded.
type pointSpy struct {
	dir            string
	mu             sync.Mutex
	acts           []keeper.Act
	whole          []bool // per intent: point.json still there
	failIntentOnce bool
}

// wrap puts s in front of c's acts.
func (s *pointSpy) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.WrapActs(c)
	f.OnRecord(func(ctx context.Context, a keeper.Act, next fault.RecordFunc) error {
		s.mu.Lock()
		s.acts = append(s.acts, a)
		fail := false
		if a.Verb == keeper.VerbDiscardPoint && a.Outcome == "intent" {
			_, err := os.Stat(filepath.Join(s.dir, "points", module, local, "f1-old", "point.json"))
			s.whole = append(s.whole, err == nil)
			fail, s.failIntentOnce = s.failIntentOnce, false
		}
		s.mu.Unlock()
		if fail {
			return errors.New("the bus takes no act now")
		}
		return next(ctx, a)
	})
}

// TestDiscardPoint: a person removes one point, even the newest one prune
// always keeps. why is required (400, nothing removed); an unknown point
// is a 404; the hand act is recorded while the point is still whole, and
// when it cannot be recorded nothing is removed; then the point is gone
// from the store and from the index, and the other point stays.
func TestDiscardPoint(t *testing.T) {
	var spy *pointSpy
	e := newEnv(t, func(c *keeper.Config) {
		spy = &pointSpy{}
		spy.wrap(c)
	})
	spy.dir = e.dir
	e.snapshot(1, "old")
	e.snapshot(2, "new")
	old := keeper.Request{Module: module, Local: local, Form: 1, Fingerprint: "old", Caller: "ops-jane"}
	dir := filepath.Join(e.dir, "points", module, local, "f1-old")

	if _, err := e.k.DiscardPoint(e.ctx, old); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("discard-point without why: got %v, want a bad request", err)
	} else {
		mustContain(t, err.Error(), "why is required for discard-point", "nothing was done")
	}
	unknown := old
	unknown.Fingerprint, unknown.Why = "never-taken", "test"
	if _, err := e.k.DiscardPoint(e.ctx, unknown); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("discard-point of a point never taken: got %v, want not found", err)
	} else {
		mustContain(t, err.Error(), "there is no restore point billing/ledger f1-never-taken, so nothing was removed")
	}

	old.Why = "moving KV_billing_ledger to another kept data's plan"
	spy.mu.Lock()
	spy.failIntentOnce = true
	spy.mu.Unlock()
	if _, err := e.k.DiscardPoint(e.ctx, old); !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("discard-point whose hand act is not recorded: got %v, want a failure", err)
	} else {
		mustContain(t, err.Error(), "could not be recorded", "so nothing was removed")
	}
	if _, err := os.Stat(filepath.Join(dir, "bus.tar")); err != nil {
		t.Fatalf("the point was touched though its hand act was not recorded: %v", err)
	}

	rep, err := e.k.DiscardPoint(e.ctx, old)
	if err != nil {
		t.Fatalf("discard-point: %v", err)
	}
	mustContain(t, rep.Said, "Discarded restore point billing/ledger f1-old", "on ops-jane's call", old.Why)
	if rep.Point == nil || rep.Point.Fingerprint != "old" {
		t.Errorf("the reply names %+v, want the point f1-old", rep.Point)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the point's directory is still there: %v", err)
	}
	if _, err := e.bus.Get(e.ctx, "point."+module+"."+local+".1.old"); !errors.Is(err, keeper.ErrNotFound) {
		t.Errorf("the point's index record is still there: %v", err)
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil || len(list.Points) != 1 || list.Points[0].Fingerprint != "new" {
		t.Fatalf("after discard-point, list-kept: %v %+v; want the point f2-new alone", err, list)
	}
	spy.mu.Lock()
	whole, last := spy.whole, spy.acts[len(spy.acts)-1]
	spy.mu.Unlock()
	if len(whole) != 2 || !whole[0] || !whole[1] {
		t.Errorf("point.json was there at each intent: %v; want [true true] (the act first)", whole)
	}
	if last.Verb != keeper.VerbDiscardPoint || last.Outcome != "done" || !last.Hand || last.Caller != "ops-jane" || last.Why != old.Why {
		t.Errorf("the last act: %+v; want discard-point done, by hand, with caller and why", last)
	}

	// The newest point, which prune always keeps, goes too.
	newest := keeper.Request{Module: module, Local: local, Form: 2, Fingerprint: "new", Why: "the kept data is retired"}
	if _, err := e.k.DiscardPoint(e.ctx, newest); err != nil {
		t.Fatalf("discard-point of the newest point: %v", err)
	}
	if _, err := e.k.DiscardPoint(e.ctx, newest); !errors.Is(err, keeper.ErrNotFound) {
		t.Errorf("discard-point again: got %v, want not found", err)
	}
}

// TestDiscardPointRefusedWhileARestoreNeedsIt: a keeper died in the middle
// of a restore from a point; its journal names the point, and until the
// restore is finished or undone discard-point refuses it (409) and removes
// nothing. A point the journal does not name goes.
func TestDiscardPointRefusedWhileARestoreNeedsIt(t *testing.T) {
	e, stop := crashEnv(t, "journal-written")
	e.snapshot(1, "fp")
	e.snapshot(1, "other")
	e.change()
	stop()
	r := keeper.Request{Module: module, Local: local, Form: 1, Fingerprint: "fp", Why: "test"}
	_, err := e.k.DiscardPoint(e.ctx, r)
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("discard-point of the point a journal restores from: got %v, want a conflict", err)
	}
	mustContain(t, err.Error(), "discard-point refused: restore point billing/ledger f1-fp is what the unfinished restore of billing/ledger restores from",
		"so nothing was removed")
	if _, err := os.Stat(filepath.Join(e.dir, "points", module, local, "f1-fp", "bus.tar")); err != nil {
		t.Fatalf("the point a restore needs was touched: %v", err)
	}
	r.Fingerprint = "other"
	if _, err := e.k.DiscardPoint(e.ctx, r); err != nil {
		t.Errorf("discard-point of a point no journal names: %v", err)
	}
}

// TestDiscardPointRefusedWhileARestoreRuns: while a restore of the kept
// data holds its lease, discard-point of the point it restores is refused
// (409, busy) and removes nothing.
func TestDiscardPointRefusedWhileARestoreRuns(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(step string) {
			if step == "journal-written" {
				once.Do(func() { close(held); <-release })
			}
		}
	})
	e.snapshot(1, "fp")
	done := make(chan error, 1)
	go func() { _, err := e.k.RestoreKept(e.ctx, req(1, "fp")); done <- err }()
	<-held
	_, err := e.k.DiscardPoint(e.ctx, keeper.Request{Module: module, Local: local, Form: 1, Fingerprint: "fp", Why: "test"})
	close(release)
	if !errors.Is(err, keeper.ErrBusy) {
		t.Fatalf("discard-point while a restore of the kept data runs: got %v, want busy", err)
	}
	mustContain(t, err.Error(), "discard-point refused", "nothing was done")
	if err := <-done; err != nil {
		t.Fatalf("the restore: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "points", module, local, "f1-fp", "bus.tar")); err != nil {
		t.Fatalf("the point was touched: %v", err)
	}
}
