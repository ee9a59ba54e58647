package keeper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// captureOn turns capture of the sample kept data on, every second, and
// runs it on e's keeper until the returned stop is called.
func (e *env) captureOn() (stop func()) {
	e.t.Helper()
	return e.captureWith(kept.CaptureSettings{SegmentEvery: kept.Duration(time.Second)})
}

// captureWith is captureOn with the settings given.
func (e *env) captureWith(settings kept.CaptureSettings) (stop func()) {
	e.t.Helper()
	r := keeper.Request{Module: module, Local: local, Capture: "on", Caller: "test", Why: "testing capture", Settings: &settings}
	if _, err := e.k.CaptureKept(e.ctx, r); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.k.RunCapture(ctx, module, local) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil {
				e.t.Errorf("the capture ended: %v", err)
			}
		})
	}
}

// captureReaches waits until the captured window reaches at.
func (e *env) captureReaches(at time.Time) *kept.CaptureInfo {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, c := range rep.Captures {
			if c.To != nil && !c.To.Before(at) {
				return &c
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the capture did not reach %s in 30 s: %+v", at, rep.Captures)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// batch writes one batch of changes to the sample kept data: KV puts and
// a delete, the object replaced, messages on the stream, one of the
// stream's earlier messages deleted, and the module's consumer moved on.
func (e *env) batch(i int) {
	e.t.Helper()
	kv, err := e.js.KeyValue(e.ctx, e.names.Bus)
	if err != nil {
		e.t.Fatal(err)
	}
	for j := range 5 {
		if _, err := kv.PutString(e.ctx, fmt.Sprintf("batch.%d", j), fmt.Sprintf("value of batch %d", i)); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := kv.Delete(e.ctx, fmt.Sprintf("batch.%d", i)); err != nil {
		e.t.Fatal(err)
	}
	obs, err := e.js.ObjectStore(e.ctx, e.names.Bus)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := obs.PutString(e.ctx, "replaced", strings.Repeat(fmt.Sprintf("object of batch %d ", i), 20_000)); err != nil {
		e.t.Fatal(err)
	}
	for j := range 10 {
		m := nats.NewMsg(fmt.Sprintf("%s.%s.orders.batch", module, local))
		m.Header.Set("Batch", fmt.Sprint(i))
		m.Data = fmt.Appendf(nil, "batch %d message %d", i, j)
		if _, err := e.js.PublishMsg(e.ctx, m); err != nil {
			e.t.Fatal(err)
		}
	}
	s, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := s.DeleteMsg(e.ctx, info.State.FirstSeq+uint64(i)); err != nil {
		e.t.Fatal(err)
	}
	c, err := e.js.Consumer(e.ctx, e.names.Stream, e.names.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := sample.Ack(e.ctx, c, 3); err != nil {
		e.t.Fatal(err)
	}
}

// asOfMoment is what a restore to a moment must give back of a dump:
// every message, in order, and the module's consumer's ack floor.
func asOfMoment(s *sample.Snapshot, reader string) string {
	var b strings.Builder
	for _, st := range s.Streams {
		fmt.Fprintf(&b, "stream %s first %d messages %d\n", st.Name, st.FirstSeq, st.Msgs)
		for _, m := range st.Messages {
			fmt.Fprintf(&b, "  %d %s %v %s %s\n", m.Seq, m.Subject, m.Header, m.Time.UTC().Format(time.RFC3339Nano), m.SHA256)
		}
		for _, c := range st.Consumers {
			if c.Name == reader {
				fmt.Fprintf(&b, "  consumer %s ack floor %d\n", c.Name, c.AckFloor)
			}
		}
	}
	return b.String()
}

// TestRestoreToAMoment: capture on, three batches written at distinct
// times; a restore to a moment after each gives back the kept data as it
// was then, message by message, and the module's consumer where it stood.
func TestRestoreToAMoment(t *testing.T) {
	e := newEnv(t, func(c *keeper.Config) { c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)) })
	stop := e.captureOn()
	e.captureReaches(time.Now())
	var moments []time.Time
	var want []string
	for i := 1; i <= 3; i++ {
		e.batch(i)
		time.Sleep(2500 * time.Millisecond) // a positions sample after the batch
		moments = append(moments, time.Now().UTC())
		want = append(want, asOfMoment(e.kept(), e.names.Reader))
		time.Sleep(1500 * time.Millisecond)
	}
	info := e.captureReaches(moments[2].Add(200 * time.Millisecond))
	if info.Segments < 3 || info.Bytes == 0 || info.From == nil {
		t.Fatalf("the capture holds too little: %+v", info)
	}
	stop()
	for _, i := range []int{0, 2, 1} {
		rep, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: module, Local: local, At: moments[i].Format(time.RFC3339Nano),
			Caller: "test", Why: fmt.Sprintf("back to moment %d", i+1)})
		if err != nil {
			t.Fatalf("restore to moment %d: %v", i+1, err)
		}
		// The newest sample before the moment was read after the batch's
		// acks, at most the 2.5 s the test waits (and a round) before it.
		if rep.PositionsAgeMS == nil || *rep.PositionsAgeMS < 0 || *rep.PositionsAgeMS > 3500 {
			t.Errorf("moment %d: the positions' age is %v", i+1, rep.PositionsAgeMS)
		}
		if got := asOfMoment(e.kept(), e.names.Reader); got != want[i] {
			t.Errorf("moment %d: the kept data differs from what it was:\n got: %s\nwant: %s", i+1, got, want[i])
		}
	}
	_, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: module, Local: local, At: moments[0].Add(-time.Hour).Format(time.RFC3339),
		Caller: "test", Why: "before the window"})
	if err == nil || !strings.Contains(err.Error(), "captured window is") {
		t.Fatalf("a moment before the window: %v", err)
	}
}

// TestIncrementalPoint: with capture on, snapshot-kept takes an incremental
// point (its base and segments, no archive of its own); verify-kept checks
// it and writes nothing, and restore-kept of it after more changes gives back the kept data as
// it was when it was taken.
func TestIncrementalPoint(t *testing.T) {
	e := newEnv(t)
	stop := e.captureOn()
	defer stop()
	want, rep := e.incrementalPoint()
	p := rep.Point
	if !p.Incremental || p.Base == "" || p.At == nil || p.Through == 0 || !strings.Contains(rep.Said, "no server snapshot was read") {
		t.Fatalf("snapshot-kept with capture on: %+v\n%s", p, rep.Said)
	}
	if _, err := os.Stat(filepath.Join(e.dir, p.Dir, "bus.tar")); !os.IsNotExist(err) {
		t.Fatalf("the incremental point has an archive of its own: %v", err)
	}
	e.batch(2)
	vrep, err := e.k.VerifyKept(e.ctx, req(1, "incremental"))
	if err != nil {
		t.Fatalf("verify-kept of the incremental point: %v", err)
	}
	if vrep.Report == nil || vrep.Report.Bytes <= 0 || !strings.Contains(vrep.Said, "without writing it") {
		t.Errorf("verify-kept of the incremental point reports %+v; want the bytes it read\n%s", vrep.Report, vrep.Said)
	}
	if m, _ := filepath.Glob(filepath.Join(e.dir, "points", module, local, "f*-at-*")); len(m) != 0 {
		t.Fatalf("verify-kept of the incremental point wrote the point of its moment: %v", m)
	}
	stop()
	r := req(1, "incremental")
	r.Why = "back to the incremental point"
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatalf("restore-kept of the incremental point: %v", err)
	}
	if got := asOfMoment(e.kept(), e.names.Reader); got != want {
		t.Errorf("the kept data differs from what it was at the point:\n got: %s\nwant: %s", got, want)
	}
}

// incrementalPoint appends a batch to the captured sample kept data, waits
// for a positions sample after it, and takes incremental point 1
// "incremental"; it returns the kept data as it was then, and the reply.
func (e *env) incrementalPoint() (string, *keeper.Reply) {
	e.t.Helper()
	e.captureReaches(time.Now())
	e.batch(1)
	time.Sleep(2500 * time.Millisecond) // a positions sample after the batch
	want := asOfMoment(e.kept(), e.names.Reader)
	rep, err := e.k.SnapshotKept(e.ctx, req(1, "incremental"))
	if err != nil {
		e.t.Fatal(err)
	}
	return want, rep
}

// TestIncrementalPointReplaced: an incremental point taken again with the
// same form and fingerprint is set aside as an incremental aside (its base
// and segments, no archive), which keeps its base from prune-kept; that
// aside restores the kept data as it was at the first point. The second
// point is taken at once: the capture holds all the streams hold.
func TestIncrementalPointReplaced(t *testing.T) {
	e := newEnv(t)
	stop := e.captureOn()
	defer stop()
	e.captureReaches(time.Now())
	e.batch(1)
	time.Sleep(2500 * time.Millisecond) // a positions sample after the batch
	want := asOfMoment(e.kept(), e.names.Reader)
	if _, err := e.k.SnapshotKept(e.ctx, req(1, "again")); err != nil {
		t.Fatal(err)
	}
	e.batch(2)
	e.captureReaches(time.Now())
	e.captureReaches(time.Now()) // a round after the batch's found nothing new
	asked := time.Now()
	rep, err := e.k.SnapshotKept(e.ctx, req(1, "again"))
	if err != nil {
		t.Fatalf("the incremental point taken again: %v", err)
	}
	a := rep.Aside
	if a == nil || !a.Incremental || a.Base == "" || a.At == nil || !rep.Point.At.Before(asked) {
		t.Fatalf("the earlier point's aside: %+v; the point's moment %v, asked at %v\n%s", a, rep.Point.At, asked, rep.Said)
	}
	r := keeper.Request{Module: module, Local: local, Caller: "test", Why: "testing", DryRun: true, Policy: &kept.Policy{KeepLast: 1}}
	pr, err := e.k.PruneKept(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range pr.Pruned {
		if d.Point.Dir == a.Base && !d.Keep {
			t.Fatalf("prune would remove the base the aside is made of: %+v", d)
		}
	}
	stop()
	back := keeper.Request{Module: module, Local: local, From: a.Dir, Caller: "test", Why: "back to the replaced point"}
	if _, err := e.k.RestoreKept(e.ctx, back); err != nil {
		t.Fatalf("restore-kept from the incremental aside: %v", err)
	}
	if got := asOfMoment(e.kept(), e.names.Reader); got != want {
		t.Errorf("the kept data differs from what it was at the replaced point:\n got: %s\nwant: %s", got, want)
	}
	if _, err := e.k.DiscardAside(e.ctx, keeper.Request{From: a.ID, Caller: "test", Why: "not needed"}); err != nil {
		t.Fatalf("discard-aside of the incremental aside: %v", err)
	}
}

// TestPruneKeepsWhatTheCaptureNeeds: prune-kept with a policy that keeps
// only the newest point keeps the capture's base all the same, and its dry
// run says why: the incremental point is made of it, and the window
// restores from its chain.
func TestPruneKeepsWhatTheCaptureNeeds(t *testing.T) {
	e := newEnv(t)
	stop := e.captureOn()
	e.captureReaches(time.Now())
	if _, err := e.k.SnapshotKept(e.ctx, req(1, "incremental")); err != nil {
		t.Fatal(err)
	}
	stop()
	off := keeper.Request{Module: module, Local: local, Capture: "off", Caller: "test", Why: "testing"}
	if _, err := e.k.CaptureKept(e.ctx, off); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.SnapshotKept(e.ctx, req(1, "newest")); err != nil {
		t.Fatal(err)
	}
	r := keeper.Request{Module: module, Local: local, Caller: "test", Why: "testing", DryRun: true, Policy: &kept.Policy{KeepLast: 1}}
	rep, err := e.k.PruneKept(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	var base *kept.PruneDecision
	for i, d := range rep.Pruned {
		if strings.HasPrefix(d.Point.Fingerprint, "capture-") {
			base = &rep.Pruned[i]
		}
	}
	if base == nil || !base.Keep || !strings.Contains(strings.Join(base.Reasons, "; "), "incremental point") {
		t.Fatalf("the capture's base in the dry run: %+v\n%s", base, rep.Said)
	}
	r.DryRun = false
	if _, err := e.k.PruneKept(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.VerifyKept(e.ctx, keeper.Request{Module: module, Local: local, Form: base.Point.Form, Fingerprint: base.Point.Fingerprint}); err != nil {
		t.Fatalf("the capture's base after a prune that keeps one point: %v", err)
	}
}

// TestRestoreToSequences: restore-kept with at-seq gives back each stream
// up to the sequence asked, message by message; a dry run of a moment
// changes nothing on the bus.
func TestRestoreToSequences(t *testing.T) {
	e := newEnv(t)
	stop := e.captureOn()
	e.captureReaches(time.Now())
	e.batch(1)
	time.Sleep(2500 * time.Millisecond) // the capture sees batch 1's delete before batch 2
	seqs := map[string]uint64{}
	for _, s := range e.names.Streams() {
		st, err := e.js.Stream(e.ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		seqs[s] = st.CachedInfo().State.LastSeq
	}
	want := messagesOnly(e.kept())
	e.batch(2)
	e.captureReaches(time.Now())
	stop()
	live := messagesOnly(e.kept())
	dry := keeper.Request{Module: module, Local: local, AtSeq: seqs, DryRun: true, Caller: "test", Why: "a dry run to sequences"}
	rep, err := e.k.RestoreKept(e.ctx, dry)
	if err != nil || rep.Plan == nil {
		t.Fatalf("a dry run to sequences: %v, %+v", err, rep)
	}
	if got := messagesOnly(e.kept()); got != live {
		t.Fatalf("a dry run changed the kept data")
	}
	r := dry
	r.DryRun, r.Why = false, "back to sequences"
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("the kept data differs from what it was at the sequences:\n got: %s\nwant: %s", got, want)
	}
}

// messagesOnly is asOfMoment without the consumers.
func messagesOnly(s *sample.Snapshot) string { return asOfMoment(s, "") }

// TestPointAtOneCut: a writer publishes to the three streams of the kept
// data in lockstep (a new KV key, a new object, a stream message, in
// turn); an incremental point taken meanwhile holds every stream at one
// cut: the restored streams hold the same number of the writer's rounds,
// give or take the one in flight at the cut.
func TestPointAtOneCut(t *testing.T) {
	e := newEnv(t)
	stop := e.captureOn()
	defer stop()
	e.captureReaches(time.Now())
	kv, err := e.js.KeyValue(e.ctx, e.names.Bus)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := e.js.ObjectStore(e.ctx, e.names.Bus)
	if err != nil {
		t.Fatal(err)
	}
	subject := fmt.Sprintf("%s.%s.orders.cut", module, local)
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
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	rep, err := e.k.SnapshotKept(e.ctx, req(1, "cut"))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Point.Incremental {
		t.Fatalf("the point is not incremental: %s", rep.Said)
	}
	time.Sleep(time.Second)
	close(halt)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stop()
	r := req(1, "cut")
	r.Why = "back to the cut"
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	rounds := map[string]int{}
	for _, s := range e.kept().Streams {
		for _, m := range s.Messages {
			switch {
			case strings.HasPrefix(m.Subject, "$KV."+e.names.Bus+".cut."):
				rounds["kv"]++
			case strings.HasPrefix(m.Subject, "$O."+e.names.Bus+".M.") && strings.Contains(m.Text, `"name":"cut-`):
				rounds["object"]++
			case m.Subject == subject:
				rounds["stream"]++
			}
		}
	}
	lo, hi := rounds["kv"], rounds["kv"]
	for _, n := range rounds {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(rounds) != 3 || lo == 0 || hi-lo > 1 {
		t.Fatalf("the restored streams hold the writer's rounds %v; want the same number, give or take one", rounds)
	}
	t.Logf("the point's cut holds %v of the writer's rounds", rounds)
}

// TestModuleAtOneCut: snapshot-kept with local "*" takes a kept data of
// the module that is not captured as a full point cut at the module's cut,
// beside the captured one's incremental point at the same moment; with
// both captured it takes one incremental point of each at one moment, and
// restore-kept with local "*" and at restores both to a moment.
func TestModuleAtOneCut(t *testing.T) {
	e := newEnv(t)
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: module + "_extra", Subjects: []string{module + ".extra.>"}}); err != nil {
		t.Fatal(err)
	}
	extra := keeper.Request{Module: module, Local: "extra", Form: 1, Fingerprint: "full", Caller: "test", Why: "testing"}
	if _, err := e.k.SnapshotKept(e.ctx, extra); err != nil {
		t.Fatal(err)
	}
	stop := e.captureOn()
	defer stop()
	e.captureReaches(time.Now())
	mixed := keeper.Request{Module: module, Local: "*", Form: 1, Fingerprint: "mixed", Caller: "test", Why: "one cut"}
	got, err := e.k.SnapshotKept(e.ctx, mixed)
	if err != nil {
		t.Fatalf("a cut with a kept data not captured: %v", err)
	}
	if len(got.Points) != 2 || got.Points[0].Local != "extra" || got.Points[0].Incremental || got.Points[0].At == nil ||
		!got.Points[1].Incremental || !got.Points[0].At.Equal(*got.Points[1].At) {
		t.Fatalf("snapshot-kept of the module with billing/extra not captured: %s %+v", got.Said, got.Points)
	}
	mustContain(t, got.Said, "1 incremental", "1 full, cut at it")
	all := keeper.Request{Module: module, Local: "*", Form: 1, Fingerprint: "cut", Caller: "test", Why: "one cut"}
	on := keeper.Request{Module: module, Local: "extra", Capture: "on", Caller: "test", Why: "testing"}
	if _, err := e.k.CaptureKept(e.ctx, on); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.k.RunCapture(ctx, module, "extra") }()
	stopExtra := sync.OnceFunc(func() { cancel(); <-done })
	defer stopExtra()
	for i := range 5 {
		if _, err := e.js.Publish(e.ctx, fmt.Sprintf("%s.extra.%d", module, i), []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	e.batch(1)
	time.Sleep(2500 * time.Millisecond)
	want := messagesOnly(e.kept())
	rep, err := e.k.SnapshotKept(e.ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 2 || !rep.Points[0].Incremental || !rep.Points[1].Incremental || !rep.Points[0].At.Equal(*rep.Points[1].At) {
		t.Fatalf("snapshot-kept of the module at one cut: %s %+v", rep.Said, rep.Points)
	}
	moment := *rep.Points[0].At
	e.batch(2)
	if _, err := e.js.Publish(e.ctx, module+".extra.after", []byte("after")); err != nil {
		t.Fatal(err)
	}
	e.captureReaches(time.Now())
	stop()
	stopExtra()
	back := keeper.Request{Module: module, Local: "*", At: moment.Format(time.RFC3339Nano), Caller: "test", Why: "the module back to the cut"}
	if _, err := e.k.RestoreKept(e.ctx, back); err != nil {
		t.Fatal(err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("billing/ledger differs from what it was at the cut:\n got: %s\nwant: %s", got, want)
	}
	st, err := e.js.Stream(e.ctx, module+"_extra")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 5 {
		t.Errorf("billing/extra holds %d messages after the restore to the cut; want the 5 before it", n)
	}
}

// TestRestoreToAMomentPassedThrough: a moment whose base messages are all
// kept (messages only appended after the base) is made with the base's
// archive passed through; one after a base message was deleted is not.
// Each restores to the kept data as it was, message by message.
func TestRestoreToAMomentPassedThrough(t *testing.T) {
	e := newEnv(t)
	stop := e.captureOn()
	e.captureReaches(time.Now())
	publish := func(batch, n int) {
		for j := range n {
			m := nats.NewMsg(fmt.Sprintf("%s.%s.orders.appended", module, local))
			m.Header.Set("Batch", fmt.Sprint(batch))
			m.Data = fmt.Appendf(nil, "appended %d message %d %s", batch, j, strings.Repeat("x", j*37))
			if _, err := e.js.PublishMsg(e.ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(1, 40)
	time.Sleep(1500 * time.Millisecond)
	appended := time.Now().UTC()
	wantAppended := messagesOnly(e.kept())
	time.Sleep(1500 * time.Millisecond)
	s, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(e.ctx, info.State.FirstSeq+1); err != nil {
		t.Fatal(err)
	}
	publish(2, 5)
	time.Sleep(1500 * time.Millisecond)
	deleted := time.Now().UTC()
	wantDeleted := messagesOnly(e.kept())
	e.captureReaches(deleted.Add(200 * time.Millisecond))
	stop()
	if wantAppended == wantDeleted {
		t.Fatal("the two moments hold the same messages")
	}
	for _, c := range []struct {
		at   time.Time
		want string
	}{{appended, wantAppended}, {deleted, wantDeleted}, {appended, wantAppended}} {
		if _, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: module, Local: local, At: c.at.Format(time.RFC3339Nano), Caller: "test", Why: "a moment"}); err != nil {
			t.Fatalf("restore to %s: %v", c.at, err)
		}
		if got := messagesOnly(e.kept()); got != c.want {
			t.Errorf("restored to %s, the kept data differs:\n got: %s\nwant: %s", c.at, got, c.want)
		}
	}
}

// TestMomentInsideCutSegments: messages written faster than the segment's
// bytes are cut into several segments in one round; a restore to a moment
// between two bursts, inside those segments' ranges, gives back exactly
// the messages stored by then, and the segments cut say how far each took
// the window (reached, before the round's own time).
func TestMomentInsideCutSegments(t *testing.T) {
	e := newEnv(t)
	stop := e.captureWith(kept.CaptureSettings{SegmentEvery: kept.Duration(time.Second), SegmentBytes: 64 << 10})
	defer stop()
	e.captureReaches(time.Now())
	burst := func(n int) {
		for j := range n {
			if _, err := e.js.Publish(e.ctx, fmt.Sprintf("%s.%s.orders.burst", module, local), fmt.Appendf(nil, "%01024d", j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	burst(300)
	mid := time.Now()
	want := messagesOnly(e.kept())
	time.Sleep(20 * time.Millisecond)
	burst(300)
	e.captureReaches(time.Now())
	stop()
	records, err := filepath.Glob(filepath.Join(e.dir, "capture", module, local, "*", "s*", "segment.json"))
	if err != nil {
		t.Fatal(err)
	}
	cut := 0
	for _, name := range records {
		var seg struct {
			Cut     bool      `json:"cut"`
			Began   time.Time `json:"began"`
			Reached time.Time `json:"reached"`
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &seg); err != nil {
			t.Fatal(err)
		}
		if seg.Cut {
			cut++
			if seg.Reached.IsZero() || !seg.Reached.Before(seg.Began) {
				t.Errorf("%s: a segment cut at its bytes took the window to %v, its round began %v", name, seg.Reached, seg.Began)
			}
		}
	}
	if cut == 0 {
		t.Fatalf("none of %d segments was cut at its 64 KiB", len(records))
	}
	r := keeper.Request{Module: module, Local: local, At: mid.UTC().Format(time.RFC3339Nano), Caller: "test", Why: "between two bursts"}
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("the kept data differs from what it was between the bursts:\n got: %s\nwant: %s", got, want)
	}
}

// TestVerbWaitsForTheCapturesBase: a person's snapshot-kept that comes
// while the capture takes its base (holding the kept data) waits for it
// and is taken, rather than refused as busy.
func TestVerbWaitsForTheCapturesBase(t *testing.T) {
	var armed atomic.Bool
	var once sync.Once
	done := make(chan error, 1)
	var e *env
	e = newAutoEnv(t, func(c *keeper.Config) {
		c.StepHook = func(step string) {
			if step != "snapshot:room-checked" || !armed.Load() {
				return
			}
			once.Do(func() {
				go func() {
					_, err := e.k.SnapshotKept(e.ctx, req(1, "person"))
					done <- err
				}()
				time.Sleep(500 * time.Millisecond) // the base holds the kept data meanwhile
			})
		}
	})
	armed.Store(true)
	stop := e.captureOn()
	defer stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("snapshot-kept while the capture took its base: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("snapshot-kept did not answer in a minute")
	}
}
