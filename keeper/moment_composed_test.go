package keeper_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// withSpool gives the keeper the private spool directory dir, as serve
// does (<dir>/spool): a composed moment must leave nothing there either.
func withSpool(dir string) envOption {
	return func(c *keeper.Config) { c.SpoolDir = dir }
}

// spoolEmpty fails t when the spool directory holds anything.
func spoolEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("the spool directory holds %s", e.Name())
	}
}

// momentPoints is the points of moments the store holds.
func momentPoints(t *testing.T, e *env) []string {
	t.Helper()
	points, err := filepath.Glob(filepath.Join(e.dir, "points", module, local, "*-at-*", "point.json"))
	if err != nil {
		t.Fatal(err)
	}
	return points
}

// TestMomentComposedBesideTheAside: a keeper (by default) restores to a
// moment with method full without writing the moment's point: its archive
// is composed while the live data is set aside, checked as composed, and
// composed again as it is restored. No archive of a moment is created in
// the store, no point of it is recorded, nothing is left in the spool
// directory, the kept data is as it was at the moment, the evidence says
// how the archive was checked, and the reply says that nothing of it is
// kept. The same moment restores again. A keeper that does not compose
// moments makes the point.
func TestMomentComposedBesideTheAside(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	fs := &fault.Store{}
	e := newAutoEnv(t, fs.Wrap, withSpool(spool))
	at, want := e.captureMoment()
	var stored atomic.Bool
	fs.OnCreate(func(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
		if momentArchive(key) {
			stored.Store(true)
		}
		return next(ctx, key)
	})
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment composed"}
	for round := range 2 {
		rep, steps, err := e.restoreSteps(req)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if stored.Load() {
			t.Errorf("round %d: an archive of the moment was created in the store", round)
		}
		if !slices.Contains(steps, "moment") || !slices.Contains(steps, "aside") || slices.Contains(steps, "verify") {
			t.Errorf("round %d: steps %v; want the moment and the aside, and no verification read", round, steps)
		}
		if got := messagesOnly(e.kept()); got != want {
			t.Errorf("round %d: restored to the moment, the kept data differs:\n got: %s\nwant: %s", round, got, want)
		}
		pointChecked(t, rep, "verified as this restore composed it")
		if rep.Aside == nil || rep.Point == nil || !strings.Contains(rep.Point.Dir, "-at-") || rep.Aside.Point != rep.Point.Dir {
			t.Errorf("round %d: the aside %+v does not name the moment's place %+v", round, rep.Aside, rep.Point)
		}
		mustContain(t, rep.Said, "was composed from the base", "and it is not kept", "a dry run of this restore makes the point of the moment")
		if p := momentPoints(t, e); len(p) != 0 {
			t.Errorf("round %d: a point of the moment was recorded: %v", round, p)
		}
		spoolEmpty(t, spool)
	}
	// A keeper that does not compose moments makes the point.
	k2, err := e.keeperOn(e.dir, func(c *keeper.Config) { c.SpoolDir, c.ComposeMoments = spool, keeper.ComposeNever })
	if err != nil {
		t.Fatal(err)
	}
	rep, err := k2.RestoreKept(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, rep.Said, "The point of the moment")
	if p := momentPoints(t, e); len(p) != 1 {
		t.Errorf("a keeper that does not compose moments made %d point(s) of the moment, want 1", len(p))
	}
}

// TestCrashAfterAComposedMomentRemovedTheLiveData stops a restore to a
// moment whose archive was composed, not stored, once the journal is
// written, and once the server has part of a stream, as a killed keeper
// would. A keeper started again makes the moment's point from the same
// base and segments (the journal names the moment), durably, and finishes
// the restore from it: the kept data is as it was at the moment, the point
// of the moment is in the store, no journal is left.
func TestCrashAfterAComposedMomentRemovedTheLiveData(t *testing.T) {
	for _, step := range []string{"journal-written", "mid-restore:" + sample.NamesOf(module, local).Stream} {
		t.Run(step, func(t *testing.T) {
			spool := filepath.Join(t.TempDir(), "spool")
			var hookOn atomic.Bool
			e := newAutoEnv(t, withSpool(spool), func(c *keeper.Config) {
				c.StepHook = func(s string) {
					if hookOn.Load() && s == step {
						panic(crash{s})
					}
				}
				if stream, ok := strings.CutPrefix(step, "mid-restore:"); ok {
					crashBus(c, stream)
				}
			})
			at, want := e.captureMoment()
			req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment composed"}
			crashAt(t, e, &hookOn, req, step)
			if p := momentPoints(t, e); len(p) != 0 {
				t.Fatalf("a point of the moment was recorded before the crash: %v", p)
			}
			k2, said := recoverOnce(t, e)
			mustContain(t, said, "was completed")
			if got := messagesOnly(e.kept()); got != want {
				t.Errorf("recovered, the kept data differs from the moment:\n got: %s\nwant: %s", got, want)
			}
			if p := momentPoints(t, e); len(p) != 1 {
				t.Errorf("recovery made %d point(s) of the moment, want 1: %v", len(p), p)
			}
			if _, err := e.bus.Get(e.ctx, "journal."+module+"."+local); !errors.Is(err, keeper.ErrNotFound) {
				t.Errorf("journal left in the index: %v", err)
			}
			if again, err := k2.Recover(e.ctx); err != nil || len(again) != 0 {
				t.Errorf("second recover: %v %q", err, again)
			}
			spoolEmpty(t, spool)
		})
	}
}

// TestCrashAfterAComposedMomentItsBaseGone: as above, but the base the
// moment was composed from is gone when the keeper starts again (a keeper
// down past the captured window): the moment cannot be made again, so
// recovery puts the live data it set aside back, and says why.
func TestCrashAfterAComposedMomentItsBaseGone(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	var hookOn atomic.Bool
	step := "journal-written"
	e := newAutoEnv(t, withSpool(spool), func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if hookOn.Load() && s == step {
				panic(crash{s})
			}
		}
	})
	at, _ := e.captureMoment()
	live := e.kept()
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment composed"}
	crashAt(t, e, &hookOn, req, step)
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	var bases int
	for _, p := range list.Points {
		if err := os.RemoveAll(filepath.Join(e.dir, p.Dir)); err != nil {
			t.Fatal(err)
		}
		bases++
	}
	if bases == 0 {
		t.Fatal("no point to remove: the capture took no base")
	}
	_, said := recoverOnce(t, e)
	mustContain(t, said, "was not completed")
	if got, wantLive := messagesOnly(e.kept()), messagesOnly(live); got != wantLive {
		t.Errorf("after the aside was put back, the kept data differs from what was live:\n got: %s\nwant: %s", got, wantLive)
	}
}

// crashAt runs the restore req on e's keeper until its hook stops it at
// step, as a killed keeper would.
func crashAt(t *testing.T, e *env, hookOn *atomic.Bool, req keeper.Request, step string) {
	t.Helper()
	hookOn.Store(true)
	defer func() {
		hookOn.Store(false)
		if _, ok := recover().(crash); !ok {
			t.Fatalf("the restore to a moment did not stop at %s", step)
		}
	}()
	e.k.RestoreKept(e.ctx, req)
}

// TestMomentForADeltaKeepsItsPoint: with method auto, where the live
// streams only gained messages since the moment, the restore rolls them
// back by delta, whose aside holds their tails only and names the
// moment's point for the rest: so that point is written into the store
// (not composed), even by a keeper that composes moments, and the aside
// put back gives the live data as it was, exactly.
func TestMomentForADeltaKeepsItsPoint(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	e := newAutoEnv(t, withSpool(spool))
	at, want := e.captureMoment()
	live := e.kept()
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Caller: "test", Why: "a moment by delta"}
	rep, err := e.k.RestoreKept(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("restored to the moment, the kept data differs:\n got: %s\nwant: %s", got, want)
	}
	mustContain(t, rep.Said, "rolled back by delta", "billing_ledger delta", "The point of the moment")
	if p := momentPoints(t, e); len(p) != 1 {
		t.Errorf("%d point(s) of the moment in the store, want the one the delta's aside names: %v", len(p), p)
	}
	spoolEmpty(t, spool)
	back, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: module, Local: local, From: "aside/" + rep.Aside.ID, Caller: "test", Why: "put back"})
	if err != nil {
		t.Fatalf("putting the delta's aside back: %v", err)
	}
	if got, wantLive := messagesOnly(e.kept()), messagesOnly(live); got != wantLive {
		t.Errorf("put back, the kept data differs from what was live:\n got: %s\nwant: %s (%s)", got, wantLive, back.Said)
	}
}

// TestCrashAfterAComposedMomentStoreFailsOnRecovery: the keeper taking an
// interrupted composed restore up cannot write the moment's point (the
// store refuses it for a while): recovery waits, saying why, and puts
// nothing back (the moment can still be made); once the store takes it,
// the next recovery makes the point and finishes the restore.
func TestCrashAfterAComposedMomentStoreFailsOnRecovery(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	var hookOn atomic.Bool
	e := newAutoEnv(t, withSpool(spool), func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if hookOn.Load() && s == "journal-written" {
				panic(crash{s})
			}
		}
	})
	at, want := e.captureMoment()
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment composed"}
	crashAt(t, e, &hookOn, req, "journal-written")

	fs := &fault.Store{}
	fs.OnCreate(func(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
		if momentArchive(key) {
			return nil, errors.New("the store is unavailable")
		}
		return next(ctx, key)
	})
	k2, err := e.keeperOn(e.dir, fs.Wrap)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := k2.Recover(e.ctx)
	if err != nil || len(rec.Waiting()) != 1 || len(rec.Said()) != 0 {
		t.Fatalf("recovery while the store refuses the moment's point: %v %+v; want it waiting", err, rec)
	}
	mustContain(t, rec.Waiting()[0].Err.Error(), "making the point of its moment", "the store is unavailable", "nothing was removed, and the keeper tries again")
	if _, err := e.bus.Get(e.ctx, "journal."+module+"."+local); err != nil {
		t.Fatalf("the journal of the waiting restore: %v", err)
	}
	fs.OnCreate(nil)
	rec, err = k2.Recover(e.ctx)
	if err != nil || len(rec.Said()) != 1 {
		t.Fatalf("recovery once the store takes it: %v %+v", err, rec)
	}
	mustContain(t, rec.Said()[0], "was completed")
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("recovered, the kept data differs from the moment:\n got: %s\nwant: %s", got, want)
	}
}

// TestComposedMomentBaseChangedBeforeItsSecondComposition: the base's bytes
// change in the store after the restore composed and checked the moment's
// archive and before it composes it again for the server (a disk or a
// store that returns other bytes the second time). The second composition
// is held to what was checked: the restore fails, saying the data changed,
// and the live data it set aside is put back whole.
func TestComposedMomentBaseChangedBeforeItsSecondComposition(t *testing.T) {
	var flip atomic.Pointer[func()]
	e := newAutoEnv(t, withSpool(filepath.Join(t.TempDir(), "spool")), func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if s != "journal-written" {
				return
			}
			if f := flip.Swap(nil); f != nil {
				(*f)()
			}
		}
	})
	at, _ := e.captureMoment()
	live := e.kept()
	bases, err := filepath.Glob(filepath.Join(e.dir, "points", module, local, "*-capture-*", "bus.tar"))
	if err != nil || len(bases) == 0 {
		t.Fatalf("no base archive in the store (%v)", err)
	}
	flipped := false
	change := func() {
		for _, path := range bases {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
				return
			}
			b[len(b)/2] ^= 0x20
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Error(err)
				return
			}
		}
		flipped = true
	}
	flip.Store(&change)
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "a moment composed"}
	_, err = e.k.RestoreKept(e.ctx, req)
	if !flipped {
		t.Fatal("the restore never wrote its journal: the base was not changed")
	}
	if err == nil {
		t.Fatal("the restore succeeded from a base changed since its moment was checked")
	}
	mustContain(t, err.Error(), "changed in the store since", "put back")
	if got, wantLive := messagesOnly(e.kept()), messagesOnly(live); got != wantLive {
		t.Errorf("after the failed restore, the kept data differs from what was live:\n got: %s\nwant: %s", got, wantLive)
	}
	if p := momentPoints(t, e); len(p) != 0 {
		t.Errorf("a point of the moment was recorded: %v", p)
	}
}
