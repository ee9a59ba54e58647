package keeper_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/transfer"
)

// TestFullPointAtOneCut: with no capture, a full point taken while a
// writer puts a KV key, an object and a stream message in turn, round by
// round, records its cut, verifies, and restores to streams that hold the
// same number of the writer's rounds, give or take one.
func TestFullPointAtOneCut(t *testing.T) {
	e := newEnv(t)
	kv, err := e.js.KeyValue(e.ctx, e.names.Bus)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := e.js.ObjectStore(e.ctx, e.names.Bus)
	if err != nil {
		t.Fatal(err)
	}
	subject := fmt.Sprintf("%s.%s.orders.cut", module, local)
	var rounds atomic.Int64
	halt, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for n := 1; ; n++ {
			select {
			case <-halt:
				done <- nil
				return
			default:
			}
			if _, err := kv.PutString(e.ctx, fmt.Sprintf("cut.%d", n), "round"); err != nil {
				done <- err
				return
			}
			if _, err := obs.PutString(e.ctx, fmt.Sprintf("cut-%d", n), "round"); err != nil {
				done <- err
				return
			}
			if _, err := e.js.Publish(e.ctx, subject, []byte("round")); err != nil {
				done <- err
				return
			}
			rounds.Store(int64(n))
		}
	}()
	waitRounds := func(n int64) {
		for rounds.Load() < n {
			select {
			case err := <-done:
				t.Fatalf("the writer stopped: %v", err)
			default:
				runtime.Gosched()
			}
		}
	}
	waitRounds(100)
	rep, err := e.k.SnapshotKept(e.ctx, req(1, "cut"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Point.Incremental || rep.Point.At == nil || rep.Point.At.After(rep.Point.Taken) {
		t.Fatalf("the point is not a full point with its cut: %+v", rep.Point)
	}
	if !strings.Contains(rep.Said, "at the cut ") {
		t.Fatalf("the reply does not say the cut: %s", rep.Said)
	}
	waitRounds(rounds.Load() + 50)
	close(halt)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(1, "cut")); err != nil {
		t.Fatalf("verify-kept of the point at its cut: %v", err)
	}
	r := req(1, "cut")
	r.Why = "back to the cut"
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, s := range e.kept().Streams {
		for _, m := range s.Messages {
			switch {
			case strings.HasPrefix(m.Subject, "$KV."+e.names.Bus+".cut."):
				got["kv"]++
			case strings.HasPrefix(m.Subject, "$O."+e.names.Bus+".M.") && strings.Contains(m.Text, `"name":"cut-`):
				got["object"]++
			case m.Subject == subject:
				got["stream"]++
			}
		}
	}
	lo, hi := got["kv"], got["kv"]
	for _, n := range got {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(got) != 3 || lo < 100 || hi-lo > 1 || int64(hi) >= rounds.Load() {
		t.Fatalf("the restored streams hold the writer's rounds %v (of %d written); want the same number, give or take one", got, rounds.Load())
	}
	t.Logf("the point's cut %s holds %v of the writer's %d rounds", rep.Point.At, got, rounds.Load())
}

// TestCutLeavesOutWhatCameAfterIt: messages stored after a full point's cut
// and before its snapshots are not in the point: its stream sum and
// manifest count them out while its last sequence is the snapshot's,
// verify-kept passes, diff-kept counts them appended, and auto rolls the
// stream back to the point by delta (the point a prefix up to the first
// message it left out), the evidence passing and the kept data the point
// with the live last sequence.
func TestCutLeavesOutWhatCameAfterIt(t *testing.T) {
	var after func()
	e := newAutoEnv(t, func(c *keeper.Config) {
		c.StepHook = func(step string) {
			if step == "snapshot:cut" && after != nil {
				after()
			}
		}
	})
	point := e.kept()
	before, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	was := before.CachedInfo().State
	after = func() { publishAfter(e, 5) }
	rep := e.snapshot(1, "fp")
	after = nil
	var sum *kept.StreamSum
	for i := range rep.Point.Streams {
		if rep.Point.Streams[i].Name == e.names.Stream {
			sum = &rep.Point.Streams[i]
		}
	}
	if rep.Point.At == nil || sum == nil || sum.Messages != was.Msgs || sum.LastSeq != was.LastSeq+5 || sum.FirstSeq != was.FirstSeq {
		t.Fatalf("the point's stream %+v (cut %v), want the %d messages before the cut to sequence %d", sum, rep.Point.At, was.Msgs, was.LastSeq+5)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(1, "fp")); err != nil {
		t.Fatalf("verify-kept: %v", err)
	}
	dr := req(1, "fp")
	dr.Why = ""
	diff, err := e.k.DiffKept(e.ctx, dr)
	if err != nil {
		t.Fatal(err)
	}
	if c := changeOf(t, diff, e.names.Stream); c.Appended != 5 || c.Removed != 0 {
		t.Errorf("diff-kept of the stream: %d appended, %d removed; want the 5 after the cut appended", c.Appended, c.Removed)
	}
	publishAfter(e, 3)
	live := e.kept()
	res, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	if c := deltaChangeOf(t, res, e.names.Stream); c.Method != kept.MethodDelta || c.Appended != 8 {
		t.Errorf("the stream's change: %+v; want delta with the 8 messages after the cut", c)
	}
	if res.Evidence == nil || res.Evidence.Verdict != keeper.Pass {
		t.Fatalf("evidence: %+v", res.Evidence)
	}
	if d := sample.Diff(rolledBack(point, live, e.names.Stream, e.names.ObjStrm), durables(e.kept())); d != "" {
		t.Errorf("after the rollback the kept data is not the point (with the live last sequences):\n%s", d)
	}
}

// publishAfter publishes n messages on the plain stream.
func publishAfter(e *env, n int) {
	e.t.Helper()
	for i := range n {
		if _, err := e.js.Publish(e.ctx, fmt.Sprintf("%s.%s.orders.after", module, local), fmt.Appendf(nil, "after the cut %d", i)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestCutPointExportsAndImports: a point whose cut left messages out
// exports as nats backup directories whose snapshots hold only the
// messages up to the cut; importing them records what each holds, so the
// imported point counts the messages held, verifies, and restores with
// its evidence passing.
func TestCutPointExportsAndImports(t *testing.T) {
	var after func()
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(step string) {
			if step == "snapshot:cut" && after != nil {
				after()
			}
		}
	})
	before, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	was := before.CachedInfo().State
	after = func() { publishAfter(e, 5) }
	e.snapshot(1, "orig")
	after = nil
	exp, err := transfer.ExportKept(e.ctx, fileStore(t, e.dir), transfer.Export{Module: module, Local: local, Form: 1, Fingerprint: "orig",
		To: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, s := range exp.Streams {
		dirs = append(dirs, s.Dir)
	}
	imp, err := e.k.ImportKept(e.ctx, req(2, "imported"), dirs)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range imp.Point.Streams {
		if s.Name == e.names.Stream && (s.Messages != was.Msgs || s.LastSeq != was.LastSeq+5) {
			t.Fatalf("the imported point's stream %+v; want the %d messages before the cut, to sequence %d", s, was.Msgs, was.LastSeq+5)
		}
	}
	if _, err := e.k.VerifyKept(e.ctx, req(2, "imported")); err != nil {
		t.Fatalf("the imported point does not verify: %v", err)
	}
	e.change()
	rep, err := e.k.RestoreKept(e.ctx, req(2, "imported"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Evidence == nil || rep.Evidence.Verdict != keeper.Pass {
		t.Fatalf("evidence of the imported point's restore: %+v", rep.Evidence)
	}
	now, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	// Its last sequence is the live one's, above the point's (planBump).
	if st := now.CachedInfo().State; st.Msgs != was.Msgs || st.LastSeq < was.LastSeq+5 {
		t.Fatalf("the restored stream holds %d messages to %d; want %d, to at least %d", st.Msgs, st.LastSeq, was.Msgs, was.LastSeq+5)
	}
}

// TestOneStreamPointIsNotCut: a kept data of one stream is not cut: its
// point is its snapshot whole, with no at, messages stored after the
// keeper read its clock included (a leader whose clock runs ahead of the
// keeper's would otherwise stamp them after the cut).
func TestOneStreamPointIsNotCut(t *testing.T) {
	var after func()
	e := newAutoEnv(t, func(c *keeper.Config) {
		c.StepHook = func(step string) {
			if step == "snapshot:cut" && after != nil {
				after()
			}
		}
	})
	for _, s := range []string{e.names.KVStream, e.names.ObjStrm} {
		if err := e.js.DeleteStream(e.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	before, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	was := before.CachedInfo().State
	after = func() { publishAfter(e, 5) }
	rep := e.snapshot(1, "one")
	after = nil
	if rep.Point.At != nil || len(rep.Point.Streams) != 1 {
		t.Fatalf("the point of one stream: at %v, %d streams; want no cut and one stream", rep.Point.At, len(rep.Point.Streams))
	}
	if s := rep.Point.Streams[0]; s.Messages != was.Msgs+5 || s.LastSeq != was.LastSeq+5 {
		t.Errorf("the point's stream holds %d messages to %d; want the %d there and the 5 stored as it was taken, to %d", s.Messages, s.LastSeq, was.Msgs, was.LastSeq+5)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(1, "one")); err != nil {
		t.Fatalf("verify-kept: %v", err)
	}
}
