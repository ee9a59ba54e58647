package keeper_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestRollbackVerifiesThePointBesideTheAside: in a restore over live data
// the point is verified while the live data is set aside. The aside waits
// for it before its commit mark (a point found damaged meanwhile leaves no
// aside and removes nothing: TestDamagedObjectsRefusedBeforeAnythingIsTouched), and a point that
// passes is restored, its check in the evidence.
func TestRollbackVerifiesThePointBesideTheAside(t *testing.T) {
	var waited bool
	e, _, _ := parallelEnv(t, 3, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if s == "aside:point-wait" {
				waited = true
			}
		}
	})
	e.snapshot(1, "fp")
	point := e.kept()
	e.change()
	live := e.kept()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	if !waited {
		t.Error("the aside did not wait for the point's verification")
	}
	if d := diffKept(e, point); d != "" {
		t.Errorf("after the rollback:\n%s", d)
	}
	if d := sample.Diff(live, archiveStreams(t, rep.Dir)); d != "" {
		t.Errorf("the aside differs from the live data:\n%s", d)
	}
	if rep.Evidence == nil || !strings.Contains(evidenceChecks(rep.Evidence), keeper.CheckPointVerified+"="+string(keeper.Pass)) {
		t.Errorf("the evidence has no check of the point: %+v", rep.Evidence)
	}
}

func evidenceChecks(ev *keeper.Evidence) string {
	var names []string
	for _, c := range ev.Checks {
		names = append(names, c.Name+"="+string(c.Verdict))
	}
	return strings.Join(names, ",")
}

// TestCrashWhileTheAsideWaitsForThePoint stops a rollback, as a killed
// keeper would, once its aside is whole and verified but waits for the
// point's verification (the crash point the overlap makes): no journal was
// written and nothing removed, so a keeper started again finds nothing to
// recover, the live data is as it was, and the aside, never committed, is
// no aside: no aside.json, and its archive is gone once a keeper starts an
// hour later (here the stopped verb's own clean-up already removed it; a
// killed keeper's is swept as a leftover, see TestLeftoversSweptWhenOld).
func TestCrashWhileTheAsideWaitsForThePoint(t *testing.T) {
	e, stop := crashEnv(t, "aside:point-wait")
	e.snapshot(1, "fp")
	e.change()
	live := e.kept()
	stop()
	k2 := restartedWithNothingToRecover(t, e, live)
	list, err := k2.ListKept(e.ctx, keeper.Request{Module: module})
	if err != nil || len(list.Asides) != 0 || len(list.Points) != 1 {
		t.Fatalf("list after the crash: %v %+v", err, list)
	}
	// Two hours later, a keeper that starts leaves no uncommitted aside.
	later, err := e.keeperOn(e.dir, func(c *keeper.Config) { c.Now = func() time.Time { return time.Now().Add(2 * time.Hour) } })
	if err != nil {
		t.Fatal(err)
	}
	_ = later
	ents, _ := os.ReadDir(filepath.Join(e.dir, "aside"))
	for _, ent := range ents {
		if files, _ := os.ReadDir(filepath.Join(e.dir, "aside", ent.Name())); len(files) > 0 {
			t.Errorf("the uncommitted aside %s was not swept: %v", ent.Name(), files)
		}
	}
	// And the rollback, asked again, is done.
	if _, err := k2.RestoreKept(e.ctx, req(1, "fp")); err != nil {
		t.Fatalf("restore-kept after the crash: %v", err)
	}
	if _, err := e.bus.Get(e.ctx, "journal."+module+"."+local); !errors.Is(err, keeper.ErrNotFound) {
		t.Errorf("journal left: %v", err)
	}
}

// restartedWithNothingToRecover checks, after a restore stopped before its
// aside counted, that the live data is live as it was, and that a keeper
// started again on e's directory finds nothing to recover; it returns
// that keeper.
func restartedWithNothingToRecover(t *testing.T, e *env, live *sample.Snapshot) *keeper.Keeper {
	t.Helper()
	if d := diffKept(e, live); d != "" {
		t.Fatalf("a crash before the aside counted changed the live data:\n%s", d)
	}
	k2, err := e.keeperOn(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	if said, err := k2.Recover(e.ctx); err != nil || len(said) != 0 {
		t.Fatalf("recover after a crash before the journal: %v %q", err, said)
	}
	return k2
}

// TestRollbackRefusesAPointThatChangedAfterItsVerification: the point is
// verified whole before anything live is removed, then read again to be
// sent. If its bytes change in between (a disk or store that returns
// something else the second time), the second read's check finds it before
// the stream's end reaches the server: the restore fails as damaged and the
// live data comes back from its aside.
func TestRollbackRefusesAPointThatChangedAfterItsVerification(t *testing.T) {
	var path string
	var at int64
	var was byte
	flipped := false
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if !strings.HasPrefix(s, "removed:") || flipped || path == "" {
				return
			}
			flipped = true
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{was ^ 0x01}, at); err != nil {
				t.Error(err)
			}
		}
	})
	snap := e.snapshot(1, "fp")
	p := filepath.Join(snap.Dir, "bus.tar")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	entry := tartest.LargestData(t, b)
	off, size := tartest.DataRange(t, b, entry)
	at = off + size/2
	was = b[at]
	e.change()
	live := e.kept()
	path = p
	_, err = e.k.RestoreKept(e.ctx, req(1, "fp"))
	if !flipped {
		t.Fatal("the restore removed nothing, so the point was not changed after its verification")
	}
	if !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("restore-kept from a point changed after its verification: got %v, want damaged", err)
	}
	mustContain(t, err.Error(), entry, "read again for the restore", "it changed in the store since")
	if d := diffKept(e, live); d != "" {
		t.Errorf("the live data did not come back from its aside:\n%s", d)
	}
}
