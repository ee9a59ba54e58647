package keeper_test

import (
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// TestMomentSaysDeletesNoLongerTracked: a capture tracks a bounded number
// of deleted sequences per stream (4,194,304; 2 here). Past it, its
// segments record the stream's deletes no further and say so, and a
// restore to a moment after that says which stream and since when: the
// moment holds the messages deleted since, as the restore shows.
func TestMomentSaysDeletesNoLongerTracked(t *testing.T) {
	e := newAutoEnv(t)
	keeper.SetTrackedDeletes(e.k, 2)
	stop := e.captureOn()
	defer stop()
	e.captureReaches(time.Now())
	s, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := info.State.Msgs
	for seq := info.State.FirstSeq + 1; seq <= info.State.FirstSeq+3; seq++ {
		if err := s.DeleteMsg(e.ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	at := time.Now().UTC()
	e.captureReaches(at.Add(200 * time.Millisecond))
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Method: kept.MethodFull, Caller: "test", Why: "untracked deletes"}
	rep, err := e.k.RestoreKept(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, rep.Said, "Stream "+e.names.Stream+" held more deleted sequences than a capture tracks",
		"the moment holds the messages deleted since then")
	if info, err = s.Info(e.ctx); err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != held {
		t.Fatalf("restored to the moment, the stream holds %d messages, want the %d it held before the untracked deletes", info.State.Msgs, held)
	}
}
