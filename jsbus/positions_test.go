package jsbus_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// consumerOf finds one consumer in a dump.
func consumerOf(t *testing.T, s *sample.Snapshot, stream, name string) sample.ConsumerDump {
	t.Helper()
	for _, d := range s.Streams {
		if d.Name != stream {
			continue
		}
		for _, c := range d.Consumers {
			if c.Name == name {
				return c
			}
		}
	}
	t.Fatalf("no consumer %s on %s", name, stream)
	return sample.ConsumerDump{}
}

// nextDelivered fetches one message and returns its stream sequence.
func nextDelivered(t *testing.T, b *bus, stream, name string) uint64 {
	t.Helper()
	c, err := b.js.Consumer(testCtx(t), stream, name)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		return md.Sequence.Stream
	}
	t.Fatalf("consumer %s on %s delivered nothing: %v", name, stream, batch.Error())
	return 0
}

// positionsOf is the positions of the sample consumers of n (on its stream
// and on SharedStream), in the order Consumers lists them.
func positionsOf(t *testing.T, a *jsbus.Adapter, n sample.Names) []keeper.Position {
	t.Helper()
	all, err := a.Consumers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []keeper.Position
	for _, p := range all {
		if (p.Stream == n.Stream && (p.Consumer == n.Reader || p.Consumer == n.Audit)) ||
			(p.Stream == sample.SharedStream && p.Consumer == n.Events) {
			out = append(out, p)
		}
	}
	if len(out) != 3 {
		t.Fatalf("positions of %s: %v", n.Bus, out)
	}
	return out
}

func TestConsumersListsEveryDurable(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	for _, m := range []string{"billing", "shipping"} {
		if err := sample.Create(ctx, b.js, m, "ledger"); err != nil {
			t.Fatal(err)
		}
	}
	s, err := b.js.Stream(ctx, "billing_ledger")
	if err != nil {
		t.Fatal(err)
	}
	// A named but not durable consumer is not a position.
	if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Name: "billing_eph", InactiveThreshold: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// A declared owner is in the configuration, for the keeper to read.
	if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "tally", AckPolicy: jetstream.AckExplicitPolicy,
		Metadata: map[string]string{"nats-keeper.module": "shipping"}}); err != nil {
		t.Fatal(err)
	}
	ps, err := b.a.Consumers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Stream+">"+p.Consumer)
	}
	want := []string{"SHARED_EVENTS>billing-events", "SHARED_EVENTS>other-events", "SHARED_EVENTS>shipping-events",
		"billing_ledger>billing-audit", "billing_ledger>billing_reader", "billing_ledger>tally",
		"shipping_ledger>shipping-audit", "shipping_ledger>shipping_reader"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumers: %v, want %v", got, want)
	}
	dump, err := sample.Dump(ctx, b.js, "billing_ledger", "shipping_ledger", sample.SharedStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		var cfg struct {
			Durable  string            `json:"durable_name"`
			Ack      string            `json:"ack_policy"`
			Metadata map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(p.Config, &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Durable != p.Consumer || cfg.Ack != "explicit" {
			t.Fatalf("config of %s: %s", p.Consumer, p.Config)
		}
		if p.Consumer == "tally" {
			if cfg.Metadata["nats-keeper.module"] != "shipping" || p.AckFloor != 0 {
				t.Fatalf("tally: ack floor %d, config %s", p.AckFloor, p.Config)
			}
			continue
		}
		if c := consumerOf(t, dump, p.Stream, p.Consumer); c.AckFloor != p.AckFloor || p.AckFloor == 0 {
			t.Fatalf("%s > %s: position ack floor %d, consumer %d", p.Stream, p.Consumer, p.AckFloor, c.AckFloor)
		}
	}
}

func TestStreamsListsEveryStream(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	ss, err := b.a.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range ss {
		got[s.Name] = fmt.Sprint(s.Subjects)
		if s.Name == "billing_ledger" && (s.LastSeq != 50 || s.Messages != 49 || s.Consumers != 2) {
			t.Fatalf("billing_ledger listed as %+v", s)
		}
	}
	want := map[string]string{
		"KV_kept":            "[$KV.kept.>]",
		"KEEPER_ACTS":        "[mesh-broker.acts.>]",
		"KV_billing_ledger":  "[$KV.billing_ledger.>]",
		"OBJ_billing_ledger": "[$O.billing_ledger.C.> $O.billing_ledger.M.>]",
		"billing_ledger":     "[billing.ledger.>]",
		"SHARED_EVENTS":      "[events.>]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("streams: %v, want %v", got, want)
	}
}

func TestSetPositionPutsConsumersBack(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	n := sample.NamesOf("billing", "ledger")
	streams := []string{n.Stream, sample.SharedStream}
	before, err := sample.Dump(ctx, b.js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	ps := positionsOf(t, b.a, n)
	if err := sample.Change(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	changed, err := sample.Dump(ctx, b.js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	otherBefore := consumerOf(t, changed, sample.SharedStream, sample.OtherConsumer)
	for _, p := range ps {
		if consumerOf(t, changed, p.Stream, p.Consumer).AckFloor == p.AckFloor {
			t.Fatalf("Change did not move %s", p.Consumer)
		}
		if err := b.a.SetPosition(ctx, p); err != nil {
			t.Fatalf("set %s > %s: %v", p.Stream, p.Consumer, err)
		}
	}
	after, err := sample.Dump(ctx, b.js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		was := consumerOf(t, before, p.Stream, p.Consumer)
		now := consumerOf(t, after, p.Stream, p.Consumer)
		if now.AckFloor != p.AckFloor || now.Next != was.Next || now.AckPolicy != was.AckPolicy ||
			fmt.Sprint(now.FilterSubjects) != fmt.Sprint(was.FilterSubjects) || now.Durable != p.Consumer {
			t.Fatalf("%s after SetPosition: %+v, at the snapshot %+v", p.Consumer, now, was)
		}
		if got := nextDelivered(t, b, p.Stream, p.Consumer); got != was.Next {
			t.Fatalf("%s delivered %d next, want %d", p.Consumer, got, was.Next)
		}
	}
	// Read back with one message delivered and unacked, each position is
	// the one that was set.
	for i, p := range positionsOf(t, b.a, n) {
		if p.Stream != ps[i].Stream || p.Consumer != ps[i].Consumer || p.AckFloor != ps[i].AckFloor {
			t.Fatalf("position read back %s > %s at %d, set %s > %s at %d", p.Stream, p.Consumer, p.AckFloor, ps[i].Stream, ps[i].Consumer, ps[i].AckFloor)
		}
	}
	if o := consumerOf(t, after, sample.SharedStream, sample.OtherConsumer); fmt.Sprint(o) != fmt.Sprint(otherBefore) {
		t.Fatalf("%s was touched: %+v, was %+v", sample.OtherConsumer, o, otherBefore)
	}

	// A live consumer that was deleted is made again.
	reader := ps[len(ps)-1]
	if reader.Consumer != n.Reader {
		t.Fatalf("last position is %s", reader.Consumer)
	}
	if err := b.js.DeleteConsumer(ctx, n.Stream, n.Reader); err != nil {
		t.Fatal(err)
	}
	if err := b.a.SetPosition(ctx, reader); err != nil {
		t.Fatal(err)
	}
	if got := nextDelivered(t, b, n.Stream, n.Reader); got != reader.AckFloor+1 {
		t.Fatalf("re-made reader delivered %d, want %d", got, reader.AckFloor+1)
	}

	// When the message after the ack floor is gone, the stream's first comes next.
	s, err := b.js.Stream(ctx, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(40)); err != nil {
		t.Fatal(err)
	}
	if err := b.a.SetPosition(ctx, reader); err != nil {
		t.Fatal(err)
	}
	if got := nextDelivered(t, b, n.Stream, n.Reader); got != 40 {
		t.Fatalf("reader delivered %d after a purge below 40, want 40", got)
	}
}

func TestSetPositionRefusesAMismatchedConfig(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	n := sample.NamesOf("billing", "ledger")
	before, err := sample.Dump(ctx, b.js, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []string{`{"durable_name":"someone-else"}`, `not json`, `[]`} {
		err := b.a.SetPosition(ctx, keeper.Position{Stream: n.Stream, Consumer: n.Reader, AckFloor: 1, Config: []byte(cfg)})
		if !errors.Is(err, keeper.ErrBadRequest) {
			t.Fatalf("config %s: %v", cfg, err)
		}
	}
	after, err := sample.Dump(ctx, b.js, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, after); d != "" {
		t.Fatalf("a refused SetPosition changed the stream:\n%s", d)
	}
}
