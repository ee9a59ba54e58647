package keeper_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// copyWaitBus fails a snapshot, when armed, once the store holds the copy
// of the earlier point that the keeper makes ready beside it.
type copyWaitBus struct {
	keeper.Bus
	armed  bool
	asides string // the store's aside directory
	saw    bool   // the copy was there when the snapshot failed
}

func (b *copyWaitBus) Snapshot(ctx context.Context, stream string, data, meta io.WriteCloser) error {
	if !b.armed {
		return b.Bus.Snapshot(ctx, stream, data, meta)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !b.saw; time.Sleep(5 * time.Millisecond) {
		copies, _ := filepath.Glob(filepath.Join(b.asides, "*", "bus.tar"))
		b.saw = len(copies) > 0
	}
	return errors.New("the bus went away (injected)")
}

// TestARetakeThatFailsLeavesTheEarlierPoint: a point taken again at the same
// form and fingerprint makes the earlier point ready to set aside while its
// snapshot runs. When the snapshot fails, the earlier point stays a point,
// whole and listed, and nothing of the aside it would have become is left
// in the store; taken again, it is set aside as before.
func TestARetakeThatFailsLeavesTheEarlierPoint(t *testing.T) {
	bus := &copyWaitBus{}
	e := newEnv(t, func(c *keeper.Config) { bus.Bus, c.Bus = c.Bus, bus })
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
