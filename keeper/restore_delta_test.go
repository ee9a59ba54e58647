package keeper_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// appendAfterPoint writes what a prefix rollback removes: n messages on the
// plain stream (with headers), two KV puts, and acks that move the module's
// consumer on the stream on.
func (e *env) appendAfterPoint(n int) {
	e.t.Helper()
	e.appendToStream(n)
	kv, err := e.js.KeyValue(e.ctx, e.names.Bus)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, k := range []string{"after.1", "user.1"} {
		if _, err := kv.PutString(e.ctx, k, "written after the point"); err != nil {
			e.t.Fatal(err)
		}
	}
}

// appendToStream writes n messages on the plain stream (with headers), and
// moves the module's consumer on it on.
func (e *env) appendToStream(n int) {
	e.t.Helper()
	for i := range n {
		m := nats.NewMsg(fmt.Sprintf("%s.%s.orders.after", module, local))
		m.Header.Set("After-N", fmt.Sprint(i))
		m.Data = fmt.Appendf(nil, "after the point %d", i)
		if _, err := e.js.PublishMsg(e.ctx, m); err != nil {
			e.t.Fatal(err)
		}
	}
	c, err := e.js.Consumer(e.ctx, e.names.Stream, e.names.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := sample.Ack(e.ctx, c, 5); err != nil {
		e.t.Fatal(err)
	}
}

// rolledBack is the point as a rollback leaves it: every message,
// consumer and state of the point, and the last sequence of each stream
// of delta the live one (live), never lower.
func rolledBack(point, live *sample.Snapshot, delta ...string) *sample.Snapshot {
	out := &sample.Snapshot{}
	for _, s := range point.Streams {
		for _, l := range live.Streams {
			if l.Name == s.Name && !l.Missing && slices.Contains(delta, s.Name) {
				s.LastSeq = l.LastSeq
				if s.Msgs == 0 {
					s.FirstSeq = l.LastSeq + 1
				}
			}
		}
		out.Streams = append(out.Streams, s)
	}
	return out
}

// durables is s without its ephemeral consumers: a reader of the bus
// (the keeper's own ordered reads among them) may leave one for its
// inactive threshold; a restore never touches them.
func durables(s *sample.Snapshot) *sample.Snapshot {
	out := &sample.Snapshot{}
	for _, d := range s.Streams {
		d.Consumers = slices.DeleteFunc(slices.Clone(d.Consumers), func(c sample.ConsumerDump) bool { return c.Durable == "" })
		out.Streams = append(out.Streams, d)
	}
	return out
}

// changeOf is the reply's stream change of s.
func deltaChangeOf(t *testing.T, rep *keeper.Reply, s string) kept.StreamChange {
	t.Helper()
	for _, c := range rep.Streams {
		if c.Stream == s {
			return c
		}
	}
	t.Fatalf("the reply names no stream %s: %+v", s, rep.Streams)
	return kept.StreamChange{}
}

// TestAutoRollsAPrefixBackByDelta: messages appended after the point (and
// a configuration changed) make the point a prefix of every stream: auto
// picks delta for each, says why, sets only the tails aside, and leaves
// every message of the point as it was (sequence, time, subject, headers,
// data), the last sequence the live one, the configuration and the
// module's consumers set back. The aside verifies, holds exactly the tail,
// and puts back exactly the live data as it was.
func TestAutoRollsAPrefixBackByDelta(t *testing.T) {
	e := newAutoEnv(t)
	point := e.kept()
	e.snapshot(1, "fp")
	e.appendAfterPoint(25)
	s, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Description = "changed after the point"
	if _, err := e.js.UpdateStream(e.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	live := e.kept()

	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	c := deltaChangeOf(t, rep, e.names.Stream)
	if c.Method != kept.MethodDelta || c.Appended != 25 || !strings.HasPrefix(c.Why, "delta: the point is a prefix, 25 messages after it") ||
		!strings.Contains(c.Why, "description") {
		t.Errorf("the plain stream's change: %+v", c)
	}
	if kv := deltaChangeOf(t, rep, e.names.KVStream); kv.Method != kept.MethodFull || !strings.Contains(kv.Why, "deny_delete") {
		t.Errorf("the KV stream's change (a KV bucket denies deletes): %+v", kv)
	}
	if o := deltaChangeOf(t, rep, e.names.ObjStrm); o.Method != kept.MethodDelta || o.Why != "delta: the point is a prefix, 0 messages after it" {
		t.Errorf("the object store's change: %+v", o)
	}
	mustContain(t, rep.Said, "rolled back by delta", "delta: the point is a prefix, 25 messages after it")
	if d := sample.Diff(rolledBack(point, live, e.names.Stream, e.names.ObjStrm), durables(e.kept())); d != "" {
		t.Errorf("after a delta rollback the kept data is not the point (with the live last sequences):\n%s", d)
	}
	if s, err = e.js.Stream(e.ctx, e.names.Stream); err != nil || s.CachedInfo().Config.Description != "" {
		t.Errorf("the configuration was not set back: %v %q", err, s.CachedInfo().Config.Description)
	}
	if rep.Evidence == nil || rep.Evidence.Verdict != keeper.Pass {
		t.Fatalf("evidence: %+v", rep.Evidence)
	}
	deltas := 0
	for _, f := range rep.Evidence.Find(keeper.CheckStreams).Streams {
		if f.Method == kept.MethodDelta && f.Verdict == keeper.Pass {
			deltas++
		}
	}
	if deltas != 2 {
		t.Errorf("the evidence checks %d delta streams, want 2: %+v", deltas, rep.Evidence.Find(keeper.CheckStreams))
	}

	// The aside: the tails of the delta streams, marked so, verified,
	// exactly the tail; the KV stream whole.
	a := rep.Aside
	for _, st := range a.Streams {
		tail := st.Name != e.names.KVStream
		if tail && (st.Base != rep.Point.Dir || st.TailAfter != lastOf(point, st.Name)) || !tail && st.Base != "" {
			t.Errorf("aside stream %+v is not marked as it holds (tail: %t)", st, tail)
		}
	}
	tails := archiveStreams(t, filepath.Join(e.dir, a.Dir))
	for _, l := range live.Streams {
		if l.Name == e.names.KVStream {
			continue
		}
		var tail []sample.Message
		for _, m := range l.Messages {
			if m.Seq > lastOf(point, l.Name) {
				tail = append(tail, m)
			}
		}
		got := dumpOf(t, tails, l.Name)
		if fmt.Sprint(got.Messages) != fmt.Sprint(tail) {
			t.Errorf("the aside's %s holds %d messages, not the tail of %d:\n%v\nwant\n%v", l.Name, len(got.Messages), len(tail), got.Messages, tail)
		}
	}
	if _, err := e.k.DiscardPoint(e.ctx, keeper.Request{Module: module, Local: local, Form: 1, Fingerprint: "fp", Caller: "ops", Why: "tidy"}); !errors.Is(err, keeper.ErrConflict) ||
		!strings.Contains(err.Error(), a.ID) {
		t.Errorf("discard-point of the point a tail follows: %v, want a conflict naming %s", err, a.ID)
	}

	// Put back: the stream composed whole from the point and the tail.
	back, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: module, Local: local, From: "aside/" + a.ID, Caller: "test", Why: "put back"})
	if err != nil {
		t.Fatalf("putting the delta's aside back: %v", err)
	}
	mustContain(t, deltaChangeOf(t, back, e.names.Stream).Why, "put back whole")
	if d := sample.Diff(durables(live), durables(e.kept())); d != "" {
		t.Errorf("the delta's aside was not put back exactly:\n%s", d)
	}
}

func lastOf(s *sample.Snapshot, name string) uint64 {
	for _, d := range s.Streams {
		if d.Name == name {
			return d.LastSeq
		}
	}
	return 0
}

func dumpOf(t *testing.T, s *sample.Snapshot, name string) sample.StreamDump {
	t.Helper()
	for _, d := range s.Streams {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no stream %s", name)
	return sample.StreamDump{}
}

// deleteInsidePoint deletes one message the point holds from the plain
// stream and appends one: the point is no prefix of it any more.
func (e *env) deleteInsidePoint() {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := s.DeleteMsg(e.ctx, 3); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.js.Publish(e.ctx, module+"."+local+".orders.after", []byte("after")); err != nil {
		e.t.Fatal(err)
	}
}

// TestAutoRestoresANonPrefixWhole: a message of the point deleted since
// makes auto pick full for that stream, saying why, and the stream is the
// point's again, message by message.
func TestAutoRestoresANonPrefixWhole(t *testing.T) {
	e := newAutoEnv(t)
	point := e.kept()
	e.snapshot(1, "fp")
	e.deleteInsidePoint()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	if c := deltaChangeOf(t, rep, e.names.Stream); c.Method != kept.MethodFull || c.Why != "full: 1 message of the point was deleted since" {
		t.Errorf("the plain stream's change: %+v", c)
	}
	if c := deltaChangeOf(t, rep, e.names.ObjStrm); c.Method != kept.MethodDelta {
		t.Errorf("the untouched object store's change: %+v", c)
	}
	got := durables(e.kept())
	if d := sample.Diff(rolledBack(point, got, e.names.ObjStrm), got); d != "" {
		t.Errorf("after the restore the kept data is not the point:\n%s", d)
	}
}

// TestDeltaRefusedOnANonPrefix: method delta on a stream the point is no
// prefix of is refused with the reason, and nothing changes.
func TestDeltaRefusedOnANonPrefix(t *testing.T) {
	e := newAutoEnv(t)
	e.snapshot(1, "fp")
	e.deleteInsidePoint()
	before := e.kept()
	r := req(1, "fp")
	r.Method = kept.MethodDelta
	_, err := e.k.RestoreKept(e.ctx, r)
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("method delta on a non-prefix: %v, want a conflict", err)
	}
	mustContain(t, err.Error(), "method delta cannot roll back exactly stream "+e.names.KVStream+": the stream denies message deletes",
		"; stream "+e.names.Stream+": 1 message of the point was deleted since", "nothing was set aside or removed")
	if d := diffKept(e, before); d != "" {
		t.Errorf("a refused delta changed the kept data:\n%s", d)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dir, "aside")); len(ents) != 0 {
		t.Errorf("a refused delta left asides: %v", ents)
	}
}

// TestDeltaDryRunSaysTheMethods: a dry run names each stream's method and
// why, and changes nothing.
func TestDeltaDryRunSaysTheMethods(t *testing.T) {
	e := newAutoEnv(t)
	e.snapshot(1, "fp")
	e.appendAfterPoint(3)
	before := e.kept()
	r := req(1, "fp")
	r.DryRun = true
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, rep.Said, "Methods: ", e.names.Stream+" delta: the point is a prefix, 3 messages after it")
	if c := deltaChangeOf(t, rep, e.names.Stream); c.Method != kept.MethodDelta {
		t.Errorf("dry run's change: %+v", c)
	}
	r.Method = kept.MethodFull
	if rep, err = e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	if c := deltaChangeOf(t, rep, e.names.Stream); c.Method != kept.MethodFull || !strings.Contains(c.Why, "the request asks for it") {
		t.Errorf("method full on a prefix: %+v", c)
	}
	if d := diffKept(e, before); d != "" {
		t.Errorf("a dry run changed the kept data:\n%s", d)
	}
}
