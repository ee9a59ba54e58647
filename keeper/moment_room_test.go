package keeper_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// TestMomentNeedsRoomForItsPoint: a keeper that writes the point of a
// moment (ComposeNever) writes it and, beside it, the aside of the live
// data. A store with room for the aside alone refuses it up front, before
// either is begun: nothing is written, set aside or removed. One that
// restores by delta writes the point first, and a store without room for
// it refuses the same way. A keeper that composes the moment (the default)
// writes the aside only, so room for the aside is enough.
func TestMomentNeedsRoomForItsPoint(t *testing.T) {
	var ds *diskStore
	e := newAutoEnv(t, writesMoments, func(c *keeper.Config) { ds = newDiskStore(c, 1<<40, false) })
	at, _ := e.captureMoment()
	before := messagesOnly(e.kept())
	var stored int64
	for _, name := range e.names.Streams() {
		s, err := e.js.Stream(e.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		stored += int64(s.CachedInfo().State.Bytes)
	}
	for _, c := range []struct {
		method string
		free   int64
	}{
		{kept.MethodFull, stored + stored/20 + keeper.RoomMargin + 1}, // the aside fits, the point beside it does not
		{kept.MethodDelta, 1},
	} {
		ds.free = c.free
		req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: c.method, Caller: "test", Why: "no room"}
		_, err := e.k.RestoreKept(e.ctx, req)
		if !errors.Is(err, keeper.ErrFailed) {
			t.Fatalf("%s with %d bytes free: %v, want a refusal", c.method, c.free, err)
		}
		mustContain(t, err.Error(), "needs about", "so nothing was done")
		if got := messagesOnly(e.kept()); got != before {
			t.Fatalf("%s: the refused restore changed the kept data:\n got: %s\nwant: %s", c.method, got, before)
		}
		if asides, _ := os.ReadDir(filepath.Join(e.dir, "aside")); len(asides) > 0 {
			t.Fatalf("%s: the refused restore left an aside: %v", c.method, asides)
		}
		points, _ := os.ReadDir(filepath.Join(e.dir, "points", module, local))
		for _, p := range points {
			if strings.Contains(p.Name(), "-at-") {
				t.Fatalf("%s: the refused restore wrote the point of the moment %s", c.method, p.Name())
			}
		}
	}
	aside := stored + stored/20 + keeper.RoomMargin + 1 // the aside fits
	composing, err := e.keeperOn(e.dir, func(c *keeper.Config) { newDiskStore(c, aside, false) })
	if err != nil {
		t.Fatal(err)
	}
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "room for the aside"}
	rep, err := composing.RestoreKept(e.ctx, req)
	if err != nil {
		t.Fatalf("composed, with room for the aside: %v", err)
	}
	mustContain(t, rep.Said, "it was written nowhere")
	ds.free = 1 << 40
	req.Why = "room"
	if _, err := e.k.RestoreKept(e.ctx, req); err != nil {
		t.Fatalf("with room: %v", err)
	}
}
