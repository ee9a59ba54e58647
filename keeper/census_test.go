package keeper_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// countStreamLists counts the $JS.API.STREAM.LIST requests (pages of the
// full stream list) sent on e's server from now on: call the result for the
// count so far.
func countStreamLists(t *testing.T, e *env) func() int {
	t.Helper()
	return countRequests(t, e, "$JS.API.STREAM.LIST")
}

// countRequests counts the requests on subject, as countStreamLists does.
func countRequests(t *testing.T, e *env, subject string) func() int {
	t.Helper()
	nc := natstest.Connect(t, e.srv)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() int {
		// The flush brings every request the server passed on before it.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		n, _, err := sub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// recorded is the set of consumers a reply's point records.
func recorded(r *keeper.Reply) map[string]bool {
	out := map[string]bool{}
	for _, p := range r.Point.Positions {
		out[p.Stream+"/"+p.Consumer] = true
	}
	return out
}

// TestSnapshotDoesNotListEveryStream: with 300 streams on the bus (two
// pages of the server's full stream list), a snapshot after the first one
// does not list every stream: its census names the streams and lists the
// consumers of those that may hold one. It still records every position.
func TestSnapshotDoesNotListEveryStream(t *testing.T) {
	e := newEnv(t)
	otherStreams(t, e, 300)
	first := e.snapshot(1, "fp0")
	lists := countStreamLists(t, e)
	creates := countRequests(t, e, "$JS.API.CONSUMER.CREATE.>")
	for i := range 3 {
		r := e.snapshot(1, fmt.Sprintf("fp%d", i+1))
		if !maps.Equal(recorded(r), recorded(first)) {
			t.Errorf("snapshot %d records %v, the first %v", i+1, recorded(r), recorded(first))
		}
	}
	if n := lists(); n != 0 {
		t.Errorf("3 snapshots sent %d pages of the full stream list, want none", n)
	}
	// A consumer the keeper made and deleted (a watcher over the index)
	// would change the account's totals under a census running beside it.
	if n := creates(); n != 0 {
		t.Errorf("3 snapshots made %d consumers, want none", n)
	}
	if len(first.Point.Positions) == 0 {
		t.Fatal("the sample's consumers were not recorded")
	}
}

// TestRestoreDoesNotListEveryStream: with 300 other streams on the bus, a
// restore over live data and one into absent data, each after a dry run,
// ask the server which streams take the point's subjects instead of
// listing every stream, and still restore; a stream that took one of
// those subjects meanwhile is still refused (TestDryRunNamesASubjectOverlap).
func TestRestoreDoesNotListEveryStream(t *testing.T) {
	e := newEnv(t)
	otherStreams(t, e, 300)
	e.snapshot(1, "fp")
	e.snapshot(1, "warm") // the first census is a full one
	lists := countStreamLists(t, e)
	for _, dry := range []bool{true, false} {
		r := req(1, "fp")
		r.DryRun = dry
		if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
			t.Fatalf("restore-kept over live data (dry run %v): %v", dry, err)
		}
	}
	e.removeKept()
	if _, err := e.k.RestoreKept(e.ctx, req(1, "fp")); err != nil {
		t.Fatalf("restore-kept into absent data: %v", err)
	}
	// Each restore lists the streams once, and only once, to find those
	// that mirror or source the restored ones (Bus.Downstreams): the server
	// keeps no index of them. 300 streams are two pages.
	if n := lists(); n > 3*2 {
		t.Errorf("the restores sent %d pages of the full stream list, want at most one listing (2 pages) each, the downstream streams'", n)
	}
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestSnapshotSeesWhatWasMadeJustBefore: a consumer made immediately
// before a snapshot is recorded, on a stream made just before too or on
// one that had no consumer; one declared by metadata on such a stream is;
// a stream made just before that makes a longer module known takes its
// consumer away; and consumers deleted just before are not recorded.
func TestSnapshotSeesWhatWasMadeJustBefore(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp0") // the first census is a full one

	fresh, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "fresh", Subjects: []string{"fresh.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, md := range map[string]map[string]string{
		"billing_new":        nil,
		"tail":               {keeper.MetaModule: module},
		"billing_ext_worker": nil,
	} {
		if _, err := fresh.CreateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	got := recorded(e.snapshot(1, "fp1"))
	for _, c := range []string{"fresh/billing_new", "fresh/tail", "fresh/billing_ext_worker"} {
		if !got[c] {
			t.Errorf("the consumer %s made just before the snapshot is not recorded (recorded %v)", c, keysOf(got))
		}
	}

	// billing_ext becomes a module the bus knows: its consumer is no
	// longer billing's.
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "billing_ext_cfg", Subjects: []string{"ext.cfg"}}); err != nil {
		t.Fatal(err)
	}
	got = recorded(e.snapshot(1, "fp2"))
	if got["fresh/billing_ext_worker"] {
		t.Error("billing_ext_worker is recorded as billing's although stream billing_ext_cfg, made just before, makes billing_ext known")
	}
	if !got["fresh/billing_new"] || !got["fresh/tail"] {
		t.Errorf("recorded %v, want fresh/billing_new and fresh/tail", keysOf(got))
	}

	for _, c := range []string{"billing_new", "tail"} {
		if err := fresh.DeleteConsumer(e.ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	got = recorded(e.snapshot(1, "fp3"))
	if got["fresh/billing_new"] || got["fresh/tail"] {
		t.Errorf("consumers deleted just before the snapshot are recorded: %v", keysOf(got))
	}
	if err := e.js.DeleteStream(e.ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	got = recorded(e.snapshot(1, "fp4"))
	for c := range got {
		if len(c) > 6 && c[:6] == "fresh/" {
			t.Errorf("a consumer of the deleted stream fresh is recorded: %s", c)
		}
	}
}

// TestRestorePlanSeesAConsumerMadeJustBefore: a restore's plan sees the
// module's consumers as they are live when it is made: one deleted just
// before is made again from the point, one made again just before is moved
// (reset), and so back.
func TestRestorePlanSeesAConsumerMadeJustBefore(t *testing.T) {
	e := newEnv(t)
	shared, err := e.js.Stream(e.ctx, sample.SharedStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.ConsumerConfig{Durable: "billing_tail", AckPolicy: jetstream.AckExplicitPolicy}
	if _, err := shared.CreateConsumer(e.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	e.snapshot(1, "fp")
	by := func() string {
		t.Helper()
		r := req(1, "fp")
		r.DryRun = true
		rep, err := e.k.RestoreKept(e.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Plan.Moves {
			if m.Stream == sample.SharedStream && m.Consumer == "billing_tail" {
				return m.By
			}
		}
		t.Fatalf("the plan does not move billing_tail: %v", rep.Plan.Moves)
		return ""
	}
	for i, want := range []string{keeper.MoveCreate, keeper.MoveReset, keeper.MoveCreate, keeper.MoveReset} {
		var err error
		if want == keeper.MoveCreate {
			err = shared.DeleteConsumer(e.ctx, "billing_tail")
		} else {
			_, err = shared.CreateConsumer(e.ctx, cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := by(); got != want {
			t.Errorf("step %d: the plan moves billing_tail by %q, want %q", i, got, want)
		}
	}
}

// otherStreams makes n memory streams of no module's (other_s000, …) on
// e's bus, each on a subject of its own name.
func otherStreams(t *testing.T, e *env, n int) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("other_s%03d", i)
		if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Storage: jetstream.MemoryStorage}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotListsOnlyTheModulesStreams: with 300 other modules' streams
// on the bus, each with a durable consumer, a snapshot after the first
// lists the consumers of no stream but those that hold one of the module's
// (by name, or by metadata: one made on another's stream just before the
// snapshot is recorded, and so is its stream listed), and reads no
// consumer one by one but the one made since (issue 39: the cost of a
// point follows the module, not the bus).
func TestSnapshotListsOnlyTheModulesStreams(t *testing.T) {
	e := newEnv(t)
	otherStreams(t, e, 300)
	for i := range 300 {
		s := fmt.Sprintf("other_s%03d", i)
		if _, err := e.js.CreateConsumer(e.ctx, s, jetstream.ConsumerConfig{Durable: s + "_reader", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	e.snapshot(1, "fp0") // the first census is a full one
	lists := countSubjects(t, e, "$JS.API.CONSUMER.LIST.>")
	infos := countSubjects(t, e, "$JS.API.CONSUMER.INFO.>")
	e.snapshot(1, "fp1")
	for _, s := range lists() {
		if strings.HasPrefix(s, "$JS.API.CONSUMER.LIST.other_") {
			t.Errorf("a snapshot of billing listed the consumers of another module's stream: %s", s)
		}
	}
	if got := infos(); len(got) != 0 {
		t.Errorf("a snapshot with no consumer made since the last read %v one by one, want none", got)
	}

	md := map[string]string{keeper.MetaModule: module}
	if _, err := e.js.CreateConsumer(e.ctx, "other_s123", jetstream.ConsumerConfig{Durable: "declared", AckPolicy: jetstream.AckExplicitPolicy, Metadata: md}); err != nil {
		t.Fatal(err)
	}
	got := recorded(e.snapshot(1, "fp2"))
	if !got["other_s123/declared"] {
		t.Errorf("the consumer declared billing's just before the snapshot is not recorded: %v", keysOf(got))
	}
	if got["other_s123/other_s123_reader"] {
		t.Error("another module's consumer on the same stream is recorded as billing's")
	}
	if got := infos(); !slices.Equal(got, []string{"$JS.API.CONSUMER.INFO.other_s123.declared"}) {
		t.Errorf("the snapshot read %v one by one, want the consumer made since, once", got)
	}
}

// countSubjects gathers the subjects of the requests on subject sent on
// e's server from now on: call the result for those so far.
func countSubjects(t *testing.T, e *env, subject string) func() []string {
	t.Helper()
	nc := natstest.Connect(t, e.srv)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var seen []string
	return func() []string {
		// The flush brings every request the server passed on before it.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := sub.NextMsg(0)
			if err != nil {
				break
			}
			seen = append(seen, m.Subject)
		}
		out := seen
		seen = nil
		return out
	}
}
