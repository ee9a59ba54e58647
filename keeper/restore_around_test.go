package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// The tests of what a restore means around the kept data (planAround): the
// streams that mirror or source it, the live consumers that are not the
// module's, the last sequence a full restore keeps, and the messages the
// stream's limits remove. Kept data "shop/orders": stream shop_orders.

const (
	aroundModule = "shop"
	aroundLocal  = "orders"
	aroundStream = aroundModule + "_" + aroundLocal
)

func aroundReq(fp string) keeper.Request {
	return keeper.Request{Module: aroundModule, Local: aroundLocal, Form: 1, Fingerprint: fp, Caller: "test", Why: "around"}
}

// aroundBed is a server and keeper with stream shop_orders (subjects
// orders.>) holding n messages, and a point of it taken then.
func aroundBed(t *testing.T, cfg jetstream.StreamConfig, n int) *testbed.Bed {
	t.Helper()
	b := testbed.New(t)
	cfg.Name, cfg.Subjects = aroundStream, []string{"orders.>"}
	if _, err := b.JS.CreateStream(b.Ctx, cfg); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, "p", n)
	if _, err := b.Keeper.SnapshotKept(b.Ctx, aroundReq("fp")); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return b
}

func publishN(t *testing.T, b *testbed.Bed, prefix string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		if _, err := b.JS.Publish(b.Ctx, fmt.Sprintf("orders.%d", i%3), []byte(fmt.Sprintf("%s%d", prefix, i))); err != nil {
			t.Fatal(err)
		}
	}
}

func lastSeq(t *testing.T, b *testbed.Bed, stream string) uint64 {
	t.Helper()
	s, err := b.JS.Stream(b.Ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

func aroundChange(t *testing.T, rep *keeper.Reply, stream string) kept.StreamChange {
	t.Helper()
	for _, c := range rep.Streams {
		if c.Stream == stream {
			return c
		}
	}
	t.Fatalf("the reply's streams %+v hold no %s", rep.Streams, stream)
	return kept.StreamChange{}
}

// TestFullRestoreWithDownstreamIsRefusedUnlessLeave: a mirror and a source
// of the restored stream are named in the dry run, with what a full restore
// means for each; a full restore is refused, changing nothing, and with
// downstream "leave" done, its reply saying how to repair them; the
// stream's last sequence does not go back, and a publish that expects it
// works.
func TestFullRestoreWithDownstreamIsRefusedUnlessLeave(t *testing.T) {
	b := aroundBed(t, jetstream.StreamConfig{}, 6)
	ctx, js := b.Ctx, b.JS
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "MIR", Mirror: &jetstream.StreamSource{Name: aroundStream}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SRC", Sources: []*jetstream.StreamSource{{Name: aroundStream}}}); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, "l", 3)
	before := lastSeq(t, b, aroundStream)

	r := aroundReq("fp")
	r.Method, r.DryRun = kept.MethodFull, true
	rep, err := b.Keeper.RestoreKept(ctx, r)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	c := aroundChange(t, rep, aroundStream)
	kinds := map[string]string{}
	for _, d := range c.Downstream {
		kinds[d.Stream] = d.Kind
		if d.Effect == "" {
			t.Errorf("downstream %s has no effect said", d.Stream)
		}
	}
	if kinds["MIR"] != "mirror" || kinds["SRC"] != "source" || len(kinds) != 2 {
		t.Errorf("dry run's downstream = %+v, want mirror MIR and source SRC", c.Downstream)
	}
	if !strings.Contains(rep.Said, "would be refused") || !strings.Contains(rep.Said, "MIR") {
		t.Errorf("dry run's said does not say the restore would be refused naming MIR: %s", rep.Said)
	}
	if c.BumpedTo != before {
		t.Errorf("dry run's bumped-to = %d, want the live last sequence %d", c.BumpedTo, before)
	}

	r.DryRun = false
	_, err = b.Keeper.RestoreKept(ctx, r)
	if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "MIR") || !strings.Contains(err.Error(), "SRC") {
		t.Fatalf("full restore without leave: %v, want a conflict naming MIR and SRC", err)
	}
	if got := lastSeq(t, b, aroundStream); got != before {
		t.Fatalf("the refused restore changed the stream: last sequence %d, was %d", got, before)
	}

	r.Downstream = kept.DownstreamLeave
	rep, err = b.Keeper.RestoreKept(ctx, r)
	if err != nil {
		t.Fatalf("full restore with leave: %v", err)
	}
	t.Log(rep.Said)
	c = aroundChange(t, rep, aroundStream)
	for _, d := range c.Downstream {
		if d.Stream == "SRC" && !strings.Contains(d.Effect, fmt.Sprintf("opt_start_seq to %d", before+1)) {
			t.Errorf("the source's effect does not say how to avoid its duplicates: %s", d.Effect)
		}
		if d.Stream == "MIR" && !strings.Contains(d.Effect, "delete those sequences") {
			t.Errorf("the mirror's effect does not say how to repair it: %s", d.Effect)
		}
	}
	if got := lastSeq(t, b, aroundStream); got != before {
		t.Errorf("after the full restore the last sequence is %d, want %d kept", got, before)
	}
	if rep.Evidence == nil || rep.Evidence.Verdict != keeper.Pass {
		t.Errorf("evidence %+v, want PASS", rep.Evidence)
	}
	ack, err := js.Publish(ctx, "orders.1", []byte("next"), jetstream.WithExpectLastSequence(before))
	if err != nil || ack.Sequence != before+1 {
		t.Errorf("a publish expecting last sequence %d: %v %v", before, ack, err)
	}
}

// TestFullRollbackKeepsAWatcherGoing: a KV watcher started before a full
// rollback keeps receiving the writes made after it, missing none; the
// bucket's last sequence never goes back, and the reply names the watcher.
func TestFullRollbackKeepsAWatcherGoing(t *testing.T) {
	b := testbed.New(t)
	ctx, js := b.Ctx, b.JS
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: aroundStream})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := kv.PutString(ctx, fmt.Sprint("k", i), "point"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Keeper.SnapshotKept(ctx, aroundReq("fp")); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := kv.PutString(ctx, fmt.Sprint("k", i), "live"); err != nil {
			t.Fatal(err)
		}
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := 0; ; i++ {
		if e := <-w.Updates(); e == nil {
			break
		} else if i == 5 || string(e.Value()) != "live" {
			t.Fatalf("the watcher's initial entry %d is %v, want the 5 live values then nil", i, e)
		}
	}
	before := lastSeq(t, b, "KV_"+aroundStream)

	r := aroundReq("fp")
	r.Method = kept.MethodFull
	rep, err := b.Keeper.RestoreKept(ctx, r)
	if err != nil {
		t.Fatalf("full rollback: %v", err)
	}
	t.Log(rep.Said)
	c := aroundChange(t, rep, "KV_"+aroundStream)
	if c.BumpedTo != before || len(c.LiveConsumers) != 1 || c.LiveConsumers[0].Kind != "ordered" {
		t.Errorf("bumped-to %d (want %d), live consumers %+v (want the watcher, ordered)", c.BumpedTo, before, c.LiveConsumers)
	}
	if got := lastSeq(t, b, "KV_"+aroundStream); got != before {
		t.Errorf("after the rollback the bucket's last sequence is %d, want %d kept", got, before)
	}
	if e, err := kv.Get(ctx, "k0"); err != nil || string(e.Value()) != "point" {
		t.Fatalf("k0 after the rollback: %v %v, want the point's value", e, err)
	}
	for i := range 3 {
		if _, err := kv.PutString(ctx, fmt.Sprint("n", i), "after"); err != nil {
			t.Fatal(err)
		}
	}
	// The watcher's ordered consumer went with the stream; nats.go makes it
	// again from the next sequence it had not seen, once it misses its
	// heartbeats. It must then have every write made after the rollback.
	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for i := range 3 {
		select {
		case e := <-w.Updates():
			if e == nil || e.Key() != fmt.Sprint("n", i) || e.Revision() <= before {
				t.Fatalf("watcher's entry %d after the rollback: %v, want n%d past revision %d", i, e, i, before)
			}
		case <-wait.Done():
			t.Fatalf("the watcher received %d of the 3 writes made after the rollback", i)
		}
	}
}

// TestTTLRestoreCountsExpired: messages whose per-message TTL passed are
// skipped by the server's restore; the dry run and the reply count them,
// and the evidence passes, counting them as expired, not missing.
func TestTTLRestoreCountsExpired(t *testing.T) {
	b := testbed.New(t)
	ctx, js := b.Ctx, b.JS
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: aroundStream, Subjects: []string{"orders.>"}, AllowMsgTTL: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		opts := []jetstream.PublishOpt{}
		if i%2 == 0 {
			opts = append(opts, jetstream.WithMsgTTL(time.Second))
		}
		if _, err := js.Publish(ctx, fmt.Sprint("orders.", i), []byte("x"), opts...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Keeper.SnapshotKept(ctx, aroundReq("fp")); err != nil {
		t.Fatal(err)
	}
	waitMsgs(t, b, 3) // the live ones with a TTL expire: the point's are past it too
	r := aroundReq("fp")
	r.Method, r.DryRun = kept.MethodFull, true
	rep, err := b.Keeper.RestoreKept(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if c := aroundChange(t, rep, aroundStream); c.Expired != 3 || !strings.Contains(rep.Said, "3 of the 6 message(s)") {
		t.Errorf("dry run: expired %d, said %q; want 3", c.Expired, rep.Said)
	}
	r.DryRun = false
	rep, err = b.Keeper.RestoreKept(ctx, r)
	if err != nil {
		t.Fatalf("restore of a stream with expired TTL messages: %v", err)
	}
	f := streamFigures(t, rep, aroundStream)
	t.Log(f.Note)
	if f.Verdict != keeper.Pass || f.Got.Messages != 3 || !strings.Contains(f.Note, "expired, not missing") {
		t.Errorf("evidence of the stream: %+v %+v, want PASS with 3 messages and the expired counted", f, f.Got)
	}
}

// TestMaxAgeRestoreSaysWhatHappens: a point whose messages are past the
// stream's max age is restored, and the dry run, the reply and the
// evidence say the server removes them at once; it does.
func TestMaxAgeRestoreSaysWhatHappens(t *testing.T) {
	b := aroundBed(t, jetstream.StreamConfig{MaxAge: time.Second}, 4)
	waitMsgs(t, b, 0)
	r := aroundReq("fp")
	r.Method = kept.MethodFull
	rep, err := b.Keeper.RestoreKept(b.Ctx, r)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if c := aroundChange(t, rep, aroundStream); c.Expired != 4 || !strings.Contains(rep.Said, "past its max age of 1s") {
		t.Errorf("reply: expired %d, said %q; want 4 past the max age", c.Expired, rep.Said)
	}
	f := streamFigures(t, rep, aroundStream)
	t.Log(rep.Said, f.Note)
	if f.Verdict != keeper.Pass || !strings.Contains(f.Note, "max age") {
		t.Errorf("evidence of the stream: %+v, want PASS saying what the max age does", f)
	}
	waitMsgs(t, b, 0)
}

func streamFigures(t *testing.T, rep *keeper.Reply, stream string) kept.StreamFigures {
	t.Helper()
	if rep.Evidence == nil {
		t.Fatal("no evidence")
	}
	c := rep.Evidence.Find(kept.CheckStreams)
	if c == nil {
		t.Fatalf("no %s check in %+v", kept.CheckStreams, rep.Evidence)
	}
	for _, f := range c.Streams {
		if f.Stream == stream {
			return f
		}
	}
	t.Fatalf("no figures of %s", stream)
	return kept.StreamFigures{}
}

// waitMsgs waits until the kept stream holds n messages (limits at work).
func waitMsgs(t *testing.T, b *testbed.Bed, n uint64) {
	t.Helper()
	s, err := b.JS.Stream(b.Ctx, aroundStream)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		info, err := s.Info(b.Ctx)
		if err == nil && info.State.Msgs == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream does not come to %d messages: %+v %v", n, info, err)
		}
	}
}

// storedMsg is one stored message as a mirror must hold it.
type storedMsg struct {
	Subject, Data, Header string
}

// messagesOf reads every message of a small stream by sequence.
func messagesOf(t *testing.T, b *testbed.Bed, stream string) map[uint64]storedMsg {
	t.Helper()
	s, err := b.JS.Stream(b.Ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]storedMsg{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(b.Ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		h := ""
		for k, v := range m.Header {
			if !strings.HasPrefix(k, "Nats-Stream-Source") {
				h += k + "=" + strings.Join(v, ",") + ";"
			}
		}
		out[seq] = storedMsg{Subject: m.Subject, Data: string(m.Data), Header: h}
	}
	return out
}

// waitLast waits until stream's last sequence is at least last (a mirror or
// a source catching up; a mirror notices its upstream was made again only
// when its health check runs, about 10 s).
func waitLast(t *testing.T, b *testbed.Bed, stream string, last uint64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); lastSeq(t, b, stream) < last; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s does not reach sequence %d: at %d", stream, last, lastSeq(t, b, stream))
		}
	}
}

// TestDownstreamRepairsAfterAFullRestore checks, on nats-server as built
// here, what the reply of a full restore with downstream "leave" tells to
// do: the mirror copies on from past the kept last sequence and, once the
// removed live messages are deleted from it, agrees with the upstream
// message by message; a source whose opt_start_seq was set as it says
// before the restore takes the new messages only, no duplicate.
func TestDownstreamRepairsAfterAFullRestore(t *testing.T) {
	b := aroundBed(t, jetstream.StreamConfig{}, 6)
	ctx, js := b.Ctx, b.JS
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "MIR", Mirror: &jetstream.StreamSource{Name: aroundStream}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SRC", Sources: []*jetstream.StreamSource{{Name: aroundStream}}}); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, "l", 3)
	live := lastSeq(t, b, aroundStream)
	waitLast(t, b, "MIR", live)
	waitLast(t, b, "SRC", live)
	// What the dry run says to do before the restore: the source's
	// opt_start_seq past the last sequence the restore keeps.
	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "SRC", Sources: []*jetstream.StreamSource{{Name: aroundStream, OptStartSeq: live + 1}}}); err != nil {
		t.Fatal(err)
	}
	r := aroundReq("fp")
	r.Method, r.Downstream = kept.MethodFull, kept.DownstreamLeave
	if _, err := b.Keeper.RestoreKept(ctx, r); err != nil {
		t.Fatalf("full restore with leave: %v", err)
	}
	publishN(t, b, "n", 3)
	waitLast(t, b, "MIR", live+3)
	waitLast(t, b, "SRC", live+3)

	up, mir := messagesOf(t, b, aroundStream), messagesOf(t, b, "MIR")
	ms, err := js.Stream(ctx, "MIR")
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(7); seq <= live; seq++ { // the removed live messages, as the reply names them
		if _, ok := up[seq]; ok {
			t.Fatalf("the upstream holds %d, which the restore removed", seq)
		}
		if err := ms.DeleteMsg(ctx, seq); err != nil {
			t.Fatalf("deleting %d from the mirror: %v", seq, err)
		}
		delete(mir, seq)
	}
	if fmt.Sprint(up) != fmt.Sprint(mir) {
		t.Errorf("after the repair the mirror holds %v, the upstream %v", mir, up)
	}
	src := messagesOf(t, b, "SRC")
	if len(src) != int(live)+3 {
		t.Errorf("the source holds %d messages, want the %d it had and the 3 new ones, no duplicate: %v", len(src), live, src)
	}
	for i := range uint64(3) {
		if src[live+1+i] != up[live+1+i] {
			t.Errorf("source #%d = %v, upstream #%d = %v", live+1+i, src[live+1+i], live+1+i, up[live+1+i])
		}
	}
}

// TestDeltaRollbackKeepsMirrorAndSourceAgreeing: after an auto rollback
// (delta: the point is a prefix) and 3 new messages, the mirror and the
// source of the stream hold every message of the upstream, the mirror at
// the same sequences; what they keep of the removed tail is what the
// reply says.
func TestDeltaRollbackKeepsMirrorAndSourceAgreeing(t *testing.T) {
	b := aroundBed(t, jetstream.StreamConfig{}, 6)
	ctx, js := b.Ctx, b.JS
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "MIR", Mirror: &jetstream.StreamSource{Name: aroundStream}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SRC", Sources: []*jetstream.StreamSource{{Name: aroundStream}}}); err != nil {
		t.Fatal(err)
	}
	publishN(t, b, "l", 3)
	live := lastSeq(t, b, aroundStream)
	waitLast(t, b, "MIR", live) // they have the tail the rollback removes
	waitLast(t, b, "SRC", live)
	rep, err := b.Keeper.RestoreKept(ctx, aroundReq("fp"))
	if err != nil {
		t.Fatalf("auto rollback: %v", err)
	}
	c := aroundChange(t, rep, aroundStream)
	if c.Method != kept.MethodDelta || len(c.Downstream) != 2 {
		t.Fatalf("auto gave %s (%s), downstream %+v; want delta naming the mirror and the source", c.Method, c.Why, c.Downstream)
	}
	for _, d := range c.Downstream {
		if !strings.Contains(d.Effect, fmt.Sprintf("%d-%d", 7, live)) {
			t.Errorf("%s's effect does not name the removed sequences 7-%d: %s", d.Stream, live, d.Effect)
		}
	}
	publishN(t, b, "n", 3)
	waitLast(t, b, "MIR", live+3)
	waitLast(t, b, "SRC", live+3)
	up, mir, src := messagesOf(t, b, aroundStream), messagesOf(t, b, "MIR"), messagesOf(t, b, "SRC")
	if len(up) != 9 {
		t.Fatalf("the upstream holds %d messages, want the point's 6 and 3 new", len(up))
	}
	for seq, m := range up {
		if mir[seq] != m {
			t.Errorf("mirror #%d = %v, upstream %v", seq, mir[seq], m)
		}
	}
	// The source holds the upstream's messages in order, at its own
	// sequences, with the removed tail where it received it.
	var order []storedMsg
	for seq := uint64(1); seq <= lastSeq(t, b, "SRC"); seq++ {
		if m, ok := src[seq]; ok && !strings.HasPrefix(m.Data, "l") {
			order = append(order, m)
		}
	}
	var want []storedMsg
	for seq := uint64(1); seq <= lastSeq(t, b, aroundStream); seq++ {
		if m, ok := up[seq]; ok {
			want = append(want, m)
		}
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("the source holds %v besides the removed tail, the upstream %v", order, want)
	}
}
