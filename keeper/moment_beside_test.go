package keeper_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// writesMoments has the keeper write a moment's point into the store, not
// compose it (keeper.ComposeNever): the path the tests of a point written
// beside the aside follow (a keeper composes by default,
// moment_composed_test.go).
func writesMoments(c *keeper.Config) { c.ComposeMoments = keeper.ComposeNever }

// asideArchive reports whether key is the archive of an aside.
func asideArchive(key string) bool {
	return strings.HasPrefix(key, "aside/") && strings.HasSuffix(key, "/bus.tar")
}

// TestMomentWrittenBesideTheAside: a restore to a moment with method full
// writes the moment's point while the live data is set aside, not before:
// the point's archive is begun only once the aside's was (the test holds
// it back until then, and a point written first would wait in vain). The
// aside names the moment's point, the point's check is the one made as it
// was written, and the kept data is as it was at the moment.
func TestMomentWrittenBesideTheAside(t *testing.T) {
	fs := &fault.Store{}
	e := newAutoEnv(t, fs.Wrap, writesMoments)
	at, want := e.captureMoment()
	beside := holdMomentUntilAside(fs)
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment beside"}
	rep, steps, err := e.restoreSteps(req)
	if err != nil {
		t.Fatal(err)
	}
	if !beside.Load() {
		t.Error("the point of the moment was begun before the live data's aside was: it was not written beside it")
	}
	if !slices.Contains(steps, "moment") || !slices.Contains(steps, "aside") || slices.Contains(steps, "verify") {
		t.Errorf("steps %v: want the moment and the aside, and no verification read", steps)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("restored to the moment, the kept data differs:\n got: %s\nwant: %s", got, want)
	}
	pointChecked(t, rep, "verified as this restore wrote it")
	if rep.Aside == nil || !strings.Contains(rep.Aside.Point, "-at-") || rep.Point == nil || rep.Aside.Point != rep.Point.Dir {
		t.Errorf("the aside %+v does not name the moment's point %+v", rep.Aside, rep.Point)
	}
	mustContain(t, rep.Said, "billing_ledger full: the request asks for it")
}

// holdMomentUntilAside makes fs hold the creation of a moment's point's
// archive back until an aside's archive is created, for 10 s at most, and
// reports whether it was created after one.
func holdMomentUntilAside(fs *fault.Store) *atomic.Bool {
	asideBegun := make(chan struct{})
	var once sync.Once
	var beside atomic.Bool
	fs.OnCreate(func(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
		switch {
		case asideArchive(key):
			once.Do(func() { close(asideBegun) })
		case momentArchive(key):
			select {
			case <-asideBegun:
				beside.Store(true)
			case <-time.After(10 * time.Second):
			}
		}
		return next(ctx, key)
	})
	return &beside
}

// TestIncrementalPointWrittenBesideTheAside: restore-kept of an
// incremental point with method full writes its moment's point beside
// the set-aside, verified as written, and gives back the kept data as it
// was at the point.
func TestIncrementalPointWrittenBesideTheAside(t *testing.T) {
	fs := &fault.Store{}
	e := newAutoEnv(t, fs.Wrap, writesMoments)
	want := e.incrementalPointChanged()
	beside := holdMomentUntilAside(fs)
	r := req(1, "incremental")
	r.Method, r.Why = kept.MethodFull, "back to the incremental point"
	rep, steps, err := e.restoreSteps(r)
	if err != nil {
		t.Fatalf("restore-kept of the incremental point: %v", err)
	}
	if !beside.Load() || !slices.Contains(steps, "moment") || slices.Contains(steps, "verify") {
		t.Errorf("written beside the aside: %v, steps %v; want beside, the moment written and not verified again", beside.Load(), steps)
	}
	pointChecked(t, rep, "verified as this restore wrote it")
	mustContain(t, rep.Said, "is incremental: its archive is")
	if got := asOfMoment(e.kept(), e.names.Reader); got != want {
		t.Errorf("the kept data differs from what it was at the point:\n got: %s\nwant: %s", got, want)
	}
}

// TestMomentBesideRefusedAsWritten: with method full, a byte of the
// moment's point damaged as it is written (the archive's SHA-256 matching
// the damage) fails its check as written while the live data is being
// set aside: the request fails naming it, the aside is not committed and
// is removed, the point not committed, the bus unchanged.
func TestMomentBesideRefusedAsWritten(t *testing.T) {
	fs := &fault.Store{}
	e := newAutoEnv(t, fs.Wrap, writesMoments)
	at, want := e.captureMoment()
	flipped := flipAMomentChunk(fs)
	before := e.kept()
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment beside"}
	_, err := e.k.RestoreKept(e.ctx, req)
	if !flipped.Load() || !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("a moment's point damaged as written beside the aside: flipped %v, got %v, want damaged", flipped.Load(), err)
	}
	mustContain(t, err.Error(), "checked as it was written", "it was not committed and nothing was set aside or removed")
	noAsideNoMoment(t, e, before)
	fs.OnCreate(nil)
	if _, err := e.k.RestoreKept(e.ctx, req); err != nil {
		t.Fatalf("the same moment once the fault is gone: %v", err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("restored to the moment, the kept data differs:\n got: %s\nwant: %s", got, want)
	}
}

// TestMomentBesideAsideFails: with method full, the aside's archive cannot
// be written while the moment's point is: the request fails saying the
// live data could not be set aside and nothing was removed; no aside is
// left and the bus is unchanged. The moment's point, written whole
// meanwhile or stopped, restores the moment once the fault is gone.
func TestMomentBesideAsideFails(t *testing.T) {
	fs := &fault.Store{}
	e := newAutoEnv(t, fs.Wrap)
	at, want := e.captureMoment()
	fs.OnCreate(func(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
		w, err := next(ctx, key)
		if err != nil || !asideArchive(key) {
			return w, err
		}
		return &fault.Writer{Writer: w, OnWrite: func(p []byte, written int64) error {
			if written > 0 {
				return errors.New("the disk is gone")
			}
			return nil
		}}, nil
	})
	before := e.kept()
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment beside"}
	_, err := e.k.RestoreKept(e.ctx, req)
	if err == nil {
		t.Fatal("a restore whose aside could not be written succeeded")
	}
	mustContain(t, err.Error(), "setting the live data aside failed", "the disk is gone", "so nothing was removed")
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("a failed restore changed the bus:\n%s", d)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dir, "aside")); len(ents) != 0 {
		t.Errorf("a failed restore left %d aside entries", len(ents))
	}
	fs.OnCreate(nil)
	if _, err := e.k.RestoreKept(e.ctx, req); err != nil {
		t.Fatalf("the same moment once the fault is gone: %v", err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("restored to the moment, the kept data differs:\n got: %s\nwant: %s", got, want)
	}
}

// noAsideNoMoment checks that a refused restore to a moment left the bus
// as before, no aside and no committed point of a moment.
func noAsideNoMoment(t *testing.T, e *env, before *sample.Snapshot) {
	t.Helper()
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("a refused restore changed the bus:\n%s", d)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dir, "aside")); len(ents) != 0 {
		t.Errorf("a refused restore left %d aside entries", len(ents))
	}
	if points, _ := filepath.Glob(filepath.Join(e.dir, "points", module, local, "*-at-*", "point.json")); len(points) > 0 {
		t.Errorf("the point that failed as written was committed: %v", points)
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Points {
		if strings.Contains(p.Fingerprint, "at-") {
			t.Errorf("the point that failed as written was recorded: %s", p.Dir)
		}
	}
}

// TestCrashWhileAMomentIsWrittenBesideTheAside stops a restore to a moment
// with method full, as a killed keeper would, once its aside is whole and
// waits for the moment's point still being written: no journal was written
// and nothing removed, so a keeper started again finds nothing to recover
// and no aside, the live data is as it was, and the same moment asked
// again is restored.
func TestCrashWhileAMomentIsWrittenBesideTheAside(t *testing.T) {
	var hookOn atomic.Bool
	e := newAutoEnv(t, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if hookOn.Load() && s == "aside:point-wait" {
				panic(crash{s})
			}
		}
	})
	at, want := e.captureMoment()
	live := e.kept()
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment beside"}
	func() {
		hookOn.Store(true)
		defer func() {
			hookOn.Store(false)
			if _, ok := recover().(crash); !ok {
				t.Fatal("the restore to a moment did not stop while its aside waited for the point")
			}
		}()
		e.k.RestoreKept(e.ctx, req)
	}()
	k2 := restartedWithNothingToRecover(t, e, live)
	list, err := k2.ListKept(e.ctx, keeper.Request{Module: module})
	if err != nil || len(list.Asides) != 0 {
		t.Fatalf("list after the crash: %v, asides %+v", err, list.Asides)
	}
	if _, err := k2.RestoreKept(e.ctx, req); err != nil {
		t.Fatalf("the same moment after the crash: %v", err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("restored to the moment, the kept data differs:\n got: %s\nwant: %s", got, want)
	}
}
