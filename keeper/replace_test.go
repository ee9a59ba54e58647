package keeper_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// copyWaitBus fails a snapshot, when armed, once the store holds the copy
// of the earlier point that the keeper makes ready beside it.
type copyWaitBus struct {
	armed  bool
	asides string // the store's aside directory
	saw    bool   // the copy was there when the snapshot failed
}

// wrap puts b in front of c's bus.
func (b *copyWaitBus) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnSnapshot(func(ctx context.Context, stream string, data, meta io.WriteCloser, next fault.SnapshotFunc) error {
		if !b.armed {
			return next(ctx, stream, data, meta)
		}
		b.saw = waitForCopy(b.asides)
		return errors.New("the bus went away (injected)")
	})
}

// waitForCopy waits, up to 10 s, for an archive in one of the aside
// directories under asides, and reports whether one came.
func waitForCopy(asides string) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if copies, _ := filepath.Glob(filepath.Join(asides, "*", "bus.tar")); len(copies) > 0 {
			return true
		}
	}
	return false
}

// TestARetakeThatFailsLeavesTheEarlierPoint: a point taken again at the same
// form and fingerprint makes the earlier point ready to set aside while its
// snapshot runs. When the snapshot fails, the earlier point stays a point,
// whole and listed, and nothing of the aside it would have become is left
// in the store; taken again, it is set aside as before.
func TestARetakeThatFailsLeavesTheEarlierPoint(t *testing.T) {
	bus := &copyWaitBus{}
	e := newEnv(t, bus.wrap)
	bus.asides = filepath.Join(e.dir, "aside")
	first := e.snapshot(3, "again")
	if first.Point.ArchiveSum == "" {
		t.Fatal("the point's record has no archive sum")
	}

	bus.armed = true
	_, err := e.k.SnapshotKept(e.ctx, req(3, "again"))
	if err == nil {
		t.Fatal("the retake whose snapshot failed succeeded")
	}
	mustContain(t, err.Error(), "was not taken")
	if !bus.saw {
		t.Fatal("the earlier point's copy was never made beside the snapshot, so this test did not walk the path it is for")
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Points) != 1 || !list.Points[0].Taken.Equal(first.Point.Taken) || len(list.Asides) != 0 {
		t.Fatalf("after the failed retake: %d point(s), %d aside(s); want the earlier point alone", len(list.Points), len(list.Asides))
	}
	if left, _ := os.ReadDir(bus.asides); len(left) != 0 {
		t.Errorf("the copy made ready for the aside is left in the store: %d entr(ies) under %s", len(left), bus.asides)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(3, "again")); err != nil {
		t.Errorf("the earlier point does not verify after the failed retake: %v", err)
	}

	bus.armed = false
	second := e.snapshot(3, "again")
	if second.Aside == nil || second.Aside.Reason != keeper.ReasonReplaced || second.Aside.ArchiveSum != first.Point.ArchiveSum {
		t.Fatalf("the retake did not set the earlier point aside whole: %+v", second.Aside)
	}
}

// holdAfterCopyBus holds a snapshot, once armed, from the moment the copy
// of the earlier point is in the store until released.
type holdAfterCopyBus struct {
	asides  string
	armed   bool
	copied  chan struct{}
	release chan struct{}
}

// wrap puts b in front of c's bus.
func (b *holdAfterCopyBus) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnSnapshot(func(ctx context.Context, stream string, data, meta io.WriteCloser, next fault.SnapshotFunc) error {
		if b.armed {
			b.armed = false
			waitForCopy(b.asides) // the test checks what is there
			close(b.copied)
			<-b.release
		}
		return next(ctx, stream, data, meta)
	})
}

// TestAKeeperStartingMidRetakeLeavesTheCopy: while a retake's snapshot runs,
// the earlier point's copy waits in the store without its aside.json, its
// time the earlier archive's (a hard link), here two hours old. A second
// keeper that starts then sweeps leftovers that old but leaves that copy:
// the kept data's lease is live. The retake then sets the earlier point
// aside whole.
func TestAKeeperStartingMidRetakeLeavesTheCopy(t *testing.T) {
	bus := &holdAfterCopyBus{copied: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, bus.wrap)
	bus.asides = filepath.Join(e.dir, "aside")
	first := e.snapshot(4, "mid")
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(first.Dir, "bus.tar"), old, old); err != nil {
		t.Fatal(err)
	}

	bus.armed = true
	done := make(chan error, 1)
	var second *keeper.Reply
	go func() {
		var err error
		second, err = e.k.SnapshotKept(e.ctx, req(4, "mid"))
		done <- err
	}()
	<-bus.copied
	copies, _ := filepath.Glob(filepath.Join(bus.asides, "*", "bus.tar"))
	if len(copies) != 1 {
		close(bus.release)
		t.Fatalf("%d copies of the earlier point in the store mid-retake, want 1", len(copies))
	}
	if _, err := e.keeperOn(e.dir); err != nil {
		close(bus.release)
		t.Fatal(err)
	}
	if _, err := os.Stat(copies[0]); err != nil {
		t.Errorf("the second keeper swept the copy a retake in flight made: %v", err)
	}
	close(bus.release)
	if err := <-done; err != nil {
		t.Fatalf("the retake: %v", err)
	}
	if second.Aside == nil || second.Aside.ArchiveSum != first.Point.ArchiveSum {
		t.Fatalf("the retake did not set the earlier point aside whole: %+v", second.Aside)
	}
	r := req(0, "")
	r.From = "aside/" + second.Aside.ID
	if _, err := e.k.VerifyKept(e.ctx, r); err != nil {
		t.Errorf("the earlier point, set aside, does not verify: %v", err)
	}
}

// TestARetakeWhoseCopyWasSweptFails: a second keeper whose clock runs two
// hours ahead judges the retake's lease lapsed and sweeps the earlier
// point's copy mid-retake. The retake then fails, saying so, and the
// earlier point stays a point, whole: no aside.json over a missing archive.
func TestARetakeWhoseCopyWasSweptFails(t *testing.T) {
	bus := &holdAfterCopyBus{copied: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, bus.wrap)
	bus.asides = filepath.Join(e.dir, "aside")
	first := e.snapshot(5, "skew")

	bus.armed = true
	done := make(chan error, 1)
	go func() {
		_, err := e.k.SnapshotKept(e.ctx, req(5, "skew"))
		done <- err
	}()
	<-bus.copied
	ahead := time.Now().Add(2 * time.Hour)
	if _, err := e.keeperOn(e.dir, func(c *keeper.Config) { c.Now = func() time.Time { return ahead } }); err != nil {
		close(bus.release)
		t.Fatal(err)
	}
	if copies, _ := filepath.Glob(filepath.Join(bus.asides, "*", "bus.tar")); len(copies) != 0 {
		close(bus.release)
		t.Fatalf("the keeper whose clock is ahead left the copy (%v), so this test did not walk the path it is for", copies)
	}
	close(bus.release)
	err := <-done
	if err == nil {
		t.Fatal("the retake whose copy of the earlier point was swept succeeded")
	}
	mustContain(t, err.Error(), "is no longer whole in the store", "the earlier one stays in place")
	list, lerr := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(list.Points) != 1 || !list.Points[0].Taken.Equal(first.Point.Taken) || len(list.Asides) != 0 {
		t.Fatalf("after the failed retake: %d point(s), %d aside(s); want the earlier point alone", len(list.Points), len(list.Asides))
	}
	if _, err := e.k.VerifyKept(e.ctx, req(5, "skew")); err != nil {
		t.Errorf("the earlier point does not verify after the failed retake: %v", err)
	}
}
