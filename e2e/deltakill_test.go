package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/kept"
)

// TestKillMidDeltaRollback kills `nats-keeper serve` (SIGKILL, by its own
// step hook) at each step of a delta rollback of a plain stream that took
// 1,005 messages after its point: once its aside is committed, once its
// journal is written, in the middle of the tail's deletes, after them,
// after the configuration is set back, and in the middle of the consumers
// set back. A keeper started again must leave the kept data as the live
// data (stopped before the journal) or as the point, every message of it
// (sequence, time, subject, headers, data) with the live last sequence and
// the module's consumer set back; either way the tail stays set aside, and
// no journal, lease or partial file is left.
func TestKillMidDeltaRollback(t *testing.T) {
	tmp := t.TempDir()
	srv := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	nc := connect(t, srv.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "keeper")
	for i, step := range []string{"aside-committed", "journal-written", "mid-delete:", "tail-deleted:", "config-set:", "position-set:"} {
		module, local := fmt.Sprintf("delta%d", i), "kill"
		stream := module + "_" + local
		switch step {
		case "mid-delete:", "tail-deleted:", "config-set:":
			step += stream
		case "position-set:":
			step += stream + "/" + module + "_reader"
		}
		t.Run(step, func(t *testing.T) {
			d := &deltaKill{t: t, js: js, url: srv.url(), dir: dir, home: tmp, module: module, local: local, stream: stream}
			d.run(step)
		})
	}
}

type deltaKill struct {
	t                     *testing.T
	js                    jetstream.JetStream
	url, dir, home        string
	module, local, stream string
}

func (d *deltaKill) req(extra map[string]any) map[string]any {
	r := map[string]any{"module": d.module, "local": d.local, "caller": "e2e", "form": 1, "fingerprint": "before"}
	for k, v := range extra {
		r[k] = v
	}
	return r
}

func (d *deltaKill) run(step string) {
	t, ctx := d.t, context.Background()
	s, err := d.js.CreateStream(ctx, jetstream.StreamConfig{Name: d.stream, Subjects: []string{d.module + "." + d.local + ".>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	d.publish(0, 50)
	if err := s.DeleteMsg(ctx, 10); err != nil { // a gap of the point's own
		t.Fatal(err)
	}
	reader, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: d.module + "_reader", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Ack(ctx, reader, 20); err != nil {
		t.Fatal(err)
	}
	k := startKeeper(t, d.url, d.dir, d.home)
	waitKeepers(t, d.js.Conn(), 1, k)
	mustCall(t, d.js.Conn(), "snapshot-kept", d.req(nil))
	point := d.dump()
	pointLast := point.Streams[0].LastSeq
	k.p.stop(t, syscall.SIGTERM, time.Minute)

	d.publish(50, 1005) // more than one batch of deletes
	if err := sample.Ack(ctx, reader, 5); err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Description = "changed after the point"
	if _, err := d.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	live := d.dump()

	k = startKeeper(t, d.url, d.dir, d.home, "NATS_KEEPER_CRASH_AT="+step)
	waitKeepers(t, d.js.Conn(), 1, k)
	body, _ := json.Marshal(d.req(map[string]any{"why": "delta kill at " + step, "method": kept.MethodDelta}))
	cctx, cancel := context.WithCancel(ctx)
	replied := make(chan reply, 1)
	go func() { replied <- call(cctx, d.js.Conn(), "restore-kept", body, 10*time.Minute) }()
	select {
	case <-k.p.exited:
	case r := <-replied:
		t.Fatalf("restore-kept replied %s before the keeper killed itself at %s\n%s", r, step, tail(k.p.log.String()))
	case <-time.After(5 * time.Minute): // a guard against hanging, not a measurement
		t.Fatalf("the keeper did not kill itself at %s\n%s", step, tail(k.p.log.String()))
	}
	cancel()
	<-replied
	var ee *exec.ExitError
	if !errors.As(k.p.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the keeper ended with %v, not SIGKILL at %s\n%s", k.p.err, step, tail(k.p.log.String()))
	}

	k = startKeeper(t, d.url, d.dir, d.home)
	waitKeepers(t, d.js.Conn(), 1, k)
	if left := waitNoStale(t, d.js, d.dir, 75*time.Second); len(left) > 0 {
		t.Errorf("after recovery these remain (leases, journals, .partial): %v", left)
	}
	want := live
	if step != "aside-committed" {
		want = point
		want.Streams[0].LastSeq = live.Streams[0].LastSeq // the last sequence never goes back
	}
	if diff := sample.Diff(want, d.dump()); diff != "" {
		t.Errorf("after a kill at %s the kept data is neither as it was nor the point:\n%s", step, diff)
	}
	if step != "aside-committed" {
		if got, err := d.js.Stream(ctx, d.stream); err != nil || got.CachedInfo().Config.Description != "" {
			t.Errorf("the configuration was not set back: %v", err)
		}
	}
	d.tailAside(pointLast)
	k.p.stop(t, syscall.SIGTERM, time.Minute)
}

// tailAside checks that the kept data has one aside, holding the stream's
// tail after sequence after.
func (d *deltaKill) tailAside(after uint64) {
	t := d.t
	var found []kept.Aside
	for _, id := range asides(t, d.dir) {
		if !strings.HasPrefix(id, d.module+".") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(d.dir, "aside", id, "aside.json"))
		if err != nil {
			t.Fatal(err)
		}
		var a kept.Aside
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		found = append(found, a)
	}
	if len(found) != 1 || len(found[0].Streams) != 1 {
		t.Fatalf("asides of %s: %+v, want the rollback's one", d.module, found)
	}
	if s := found[0].Streams[0]; s.TailAfter != after || s.Base == "" || s.Messages != 1005 {
		t.Errorf("the aside's stream %+v is not the tail of 1,005 messages after sequence %d", s, after)
	}
	verifyArchive(t, filepath.Join(d.dir, "aside", found[0].ID))
}

func (d *deltaKill) publish(from, n int) {
	d.t.Helper()
	for i := from; i < from+n; i++ {
		m := nats.NewMsg(fmt.Sprintf("%s.%s.orders.%d", d.module, d.local, i%7))
		m.Header.Set("Sample-N", fmt.Sprint(i))
		m.Data = fmt.Appendf(nil, `{"n":%d}`, i)
		if _, err := d.js.PublishMsg(context.Background(), m); err != nil {
			d.t.Fatal(err)
		}
	}
}

// dump is the kept data's stream with its durable consumers (a reader's
// ephemeral consumer may linger for its inactive threshold).
func (d *deltaKill) dump() *sample.Snapshot {
	d.t.Helper()
	s, err := sample.Dump(context.Background(), d.js, d.stream)
	if err != nil {
		d.t.Fatal(err)
	}
	for i := range s.Streams {
		s.Streams[i].Consumers = slices.DeleteFunc(s.Streams[i].Consumers, func(c sample.ConsumerDump) bool { return c.Durable == "" })
	}
	return s
}
