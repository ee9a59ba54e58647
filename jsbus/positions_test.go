package jsbus_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
	if m, ok := <-batch.Messages(); ok { // Fetch(1): one message at most
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
	all, err := everyConsumer(testCtx(t), a)
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
	ps, err := everyConsumer(ctx, b.a)
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

// A stream of more consumers than fit one page is listed in full, each
// consumer once with its own position, though its pages are asked several
// at once: 1,300 consumers are the first page, four at once, and one more.
func TestConsumersListsEveryPage(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	s, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "crowd", Subjects: []string{"crowd.>"}, MaxConsumers: 2000,
		Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := b.js.Publish(ctx, fmt.Sprintf("crowd.%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	const n = 1300
	for i := range n {
		// Each consumer starts past a different number of messages, so a
		// position given to the wrong name would show.
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("c%04d", i),
			AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
			OptStartSeq: uint64(i%5 + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := b.a.Consumers(ctx, []string{"crowd"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != n {
		t.Fatalf("listed %d consumers, want %d", len(ps), n)
	}
	seen := map[string]bool{}
	for _, p := range ps {
		var i int
		if _, err := fmt.Sscanf(p.Consumer, "c%04d", &i); err != nil || seen[p.Consumer] {
			t.Fatalf("consumer %q listed twice or not one of ours (%v)", p.Consumer, err)
		}
		seen[p.Consumer] = true
		var cfg struct {
			Start uint64 `json:"opt_start_seq"`
		}
		if err := json.Unmarshal(p.Config, &cfg); err != nil || cfg.Start != uint64(i%5+1) {
			t.Fatalf("%s: config %s (%v), want its own start %d", p.Consumer, p.Config, err, i%5+1)
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

// appStream makes stream APP with 30 messages on app.<n>.
func appStream(t *testing.T, b *bus) jetstream.Stream {
	t.Helper()
	ctx := testCtx(t)
	s, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "APP", Subjects: []string{"app.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 30; i++ {
		if _, err := b.js.Publish(ctx, fmt.Sprintf("app.%d", i), []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// appConsumer makes the app's durable from cfg and acks count messages.
func appConsumer(t *testing.T, s jetstream.Stream, cfg jetstream.ConsumerConfig, count int) jetstream.Consumer {
	t.Helper()
	c, err := s.CreateOrUpdateConsumer(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Ack(testCtx(t), c, count); err != nil {
		t.Fatal(err)
	}
	return c
}

// positionOf is the position Consumers reads for one consumer.
func positionOf(t *testing.T, a *jsbus.Adapter, stream, consumer string) keeper.Position {
	t.Helper()
	ps, err := everyConsumer(testCtx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Stream == stream && p.Consumer == consumer {
			return p
		}
	}
	t.Fatalf("no position of %s > %s in %v", stream, consumer, ps)
	return keeper.Position{}
}

func consumerInfo(t *testing.T, s jetstream.Stream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := s.Consumer(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return c.CachedInfo()
}

// TestSetPositionKeepsTheLiveConsumer sets a deliver_policy all durable at ack
// floor 20 back to 5: the live consumer is moved, not re-made, and keeps its
// own configuration, so the app can create or update it with its own
// configuration afterwards (re-making it at a start sequence made that fail
// with 10012 "deliver policy can not be updated").
func TestSetPositionKeepsTheLiveConsumer(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	s := appStream(t, b)
	app := jetstream.ConsumerConfig{Durable: "app", AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy, FilterSubject: "app.>", Description: "v1",
		Metadata: map[string]string{"owner": "app"}}
	c := appConsumer(t, s, app, 5)
	p := positionOf(t, b.a, "APP", "app")
	if p.AckFloor != 5 {
		t.Fatalf("recorded ack floor %d, want 5", p.AckFloor)
	}
	if err := sample.Ack(ctx, c, 15); err != nil {
		t.Fatal(err)
	}
	// The app changes its consumer after the position was recorded, and
	// has one message delivered and not acknowledged.
	v2 := app
	v2.Description, v2.Metadata = "v2", map[string]string{"owner": "app", "rev": "2"}
	if _, err := s.UpdateConsumer(ctx, v2); err != nil {
		t.Fatal(err)
	}
	if got := nextDelivered(t, b, "APP", "app"); got != 21 {
		t.Fatalf("delivered %d before the reset, want 21", got)
	}
	was := consumerInfo(t, s, "app")
	if was.AckFloor.Stream != 20 || was.NumAckPending != 1 {
		t.Fatalf("before SetPosition: ack floor %d, %d pending", was.AckFloor.Stream, was.NumAckPending)
	}

	if err := b.a.SetPosition(ctx, p); err != nil {
		t.Fatal(err)
	}
	now := consumerInfo(t, s, "app")
	// The app starts again with its original configuration.
	if _, err := s.CreateOrUpdateConsumer(ctx, app); err != nil {
		t.Fatalf("the app's own CreateOrUpdateConsumer failed after SetPosition: %v", err)
	}
	if now.Config.DeliverPolicy != jetstream.DeliverAllPolicy || now.Config.Description != "v2" ||
		now.Config.Metadata["rev"] != "2" || now.Config.FilterSubject != "app.>" {
		t.Fatalf("the live configuration changed: %+v", now.Config)
	}
	if !now.Created.Equal(was.Created) {
		t.Fatalf("the consumer was re-made: created %s, was %s", now.Created, was.Created)
	}
	if now.AckFloor.Stream != 5 || now.NumAckPending != 0 || now.NumPending != 25 {
		t.Fatalf("after SetPosition: ack floor %d, %d ack pending, %d pending", now.AckFloor.Stream, now.NumAckPending, now.NumPending)
	}
	if got := positionOf(t, b.a, "APP", "app").AckFloor; got != 5 {
		t.Fatalf("ack floor read back %d, want 5", got)
	}
	if got := nextDelivered(t, b, "APP", "app"); got != 6 {
		t.Fatalf("delivered %d next, want 6", got)
	}
}

// TestSetPositionMakesAMissingConsumer: a consumer that is gone is made from
// its recorded configuration, deliver policy and start included, and moved.
func TestSetPositionMakesAMissingConsumer(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	s := appStream(t, b)
	for _, tc := range []struct {
		cfg         jetstream.ConsumerConfig
		acks        int
		floor, next uint64
	}{
		{jetstream.ConsumerConfig{Durable: "app", AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubjects: []string{"app.7", "app.9", "app.12"}, Metadata: map[string]string{"owner": "app"}}, 2, 9, 12},
		{jetstream.ConsumerConfig{Durable: "from3", AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 3}, 4, 6, 7},
	} {
		name := tc.cfg.Durable
		appConsumer(t, s, tc.cfg, tc.acks)
		p := positionOf(t, b.a, "APP", name)
		if p.AckFloor != tc.floor {
			t.Fatalf("%s recorded at %d, want %d", name, p.AckFloor, tc.floor)
		}
		if !strings.Contains(string(p.Config), `"_nats.`) {
			t.Fatalf("the recorded configuration holds none of the server's metadata: %s", p.Config)
		}
		if err := s.DeleteConsumer(ctx, name); err != nil {
			t.Fatal(err)
		}
		if err := b.a.SetPosition(ctx, p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := consumerInfo(t, s, name)
		if got.Config.DeliverPolicy != tc.cfg.DeliverPolicy || got.Config.OptStartSeq != tc.cfg.OptStartSeq ||
			fmt.Sprint(got.Config.FilterSubjects) != fmt.Sprint(tc.cfg.FilterSubjects) ||
			got.Config.Metadata["owner"] != tc.cfg.Metadata["owner"] {
			t.Fatalf("%s made as %+v", name, got.Config)
		}
		if got.AckFloor.Stream != tc.floor {
			t.Fatalf("%s made at ack floor %d, want %d", name, got.AckFloor.Stream, tc.floor)
		}
		if _, err := s.CreateOrUpdateConsumer(ctx, tc.cfg); err != nil {
			t.Fatalf("the app's own CreateOrUpdateConsumer of %s failed after SetPosition: %v", name, err)
		}
		if got := nextDelivered(t, b, "APP", name); got != tc.next {
			t.Fatalf("%s delivered %d next, want %d", name, got, tc.next)
		}
	}
}

// faultyAPI answers the JetStream API of domain "fault" by passing each
// request on to the server's own API, except that the first fail creates of
// the consumer named create answer a server-side failure, as nats-server does
// when a consumer deleted just before still writes its state. It counts the
// creates of that consumer. It answers until the returned connection is closed.
func faultyAPI(t *testing.T, b *bus, create string, fail int) (*atomic.Int32, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(b.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var creates atomic.Int32
	const prefix = "$JS.fault.API."
	_, err = nc.Subscribe(prefix+">", func(m *nats.Msg) {
		subject := "$JS.API." + strings.TrimPrefix(m.Subject, prefix)
		if subject == "$JS.API.CONSUMER.CREATE."+create {
			if n := creates.Add(1); int(n) <= fail {
				m.Respond([]byte(`{"type":"io.nats.jetstream.api.v1.consumer_create_response","error":{"code":500,"err_code":10012,` +
					`"description":"rename o.dat.tmp o.dat: no such file or directory"}}`))
				return
			}
		}
		resp, err := nc.RequestMsg(&nats.Msg{Subject: subject, Header: m.Header, Data: m.Data}, 5*time.Second)
		if err != nil {
			t.Errorf("pass %s on: %v", subject, err)
			return
		}
		m.RespondMsg(&nats.Msg{Header: resp.Header, Data: resp.Data})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &creates, nc
}

// TestSetPositionMakesAMissingConsumerAfterAServerFailure: a create of a
// missing consumer the server fails on its own side (nats-server 2.15.3 does
// so when the consumer was deleted while it still wrote its state) is sent
// again, a bounded number of times; one that keeps failing says so and leaves
// nothing made.
func TestSetPositionMakesAMissingConsumerAfterAServerFailure(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	s := appStream(t, b)
	cfg := jetstream.ConsumerConfig{Durable: "app", AckPolicy: jetstream.AckExplicitPolicy}
	appConsumer(t, s, cfg, 4)
	p := positionOf(t, b.a, "APP", "app")
	for _, tc := range []struct {
		fail, creates int
		made          bool
	}{{1, 2, true}, {5, 3, false}} {
		if err := s.DeleteConsumer(ctx, "app"); err != nil {
			t.Fatal(err)
		}
		creates, api := faultyAPI(t, b, "APP.app", tc.fail)
		a, err := jsbus.New(ctx, b.nc, jsbus.WithDomain("fault"), jsbus.WithLogger(quiet()))
		if err != nil {
			t.Fatal(err)
		}
		err = a.SetPosition(ctx, p)
		api.Close()
		if got := int(creates.Load()); got != tc.creates {
			t.Fatalf("%d failures: the create was sent %d times, want %d", tc.fail, got, tc.creates)
		}
		if tc.made {
			if err != nil {
				t.Fatalf("one failure: %v", err)
			}
			if got := consumerInfo(t, s, "app"); got.AckFloor.Stream != 4 {
				t.Fatalf("made at ack floor %d, want 4", got.AckFloor.Stream)
			}
			continue
		}
		if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "so it was not made") {
			t.Fatalf("a create that keeps failing: %v, want ErrConflict saying it was not made", err)
		}
		if _, err := s.Consumer(ctx, "app"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("a create that kept failing left the consumer: %v", err)
		}
	}
}

// TestSetPositionRefusedLeavesTheConsumer: the server moves a
// by_start_sequence consumer only to its start or later, and a deliver_policy
// last one not at all; a refused position says so and changes nothing.
func TestSetPositionRefusedLeavesTheConsumer(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	s := appStream(t, b)
	from10 := jetstream.ConsumerConfig{Durable: "from10", AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 10}
	appConsumer(t, s, from10, 5)
	p := positionOf(t, b.a, "APP", "from10")
	if p.AckFloor != 14 {
		t.Fatalf("recorded at %d, want 14", p.AckFloor)
	}
	was := consumerInfo(t, s, "from10")
	p.AckFloor = 3
	err := b.a.SetPosition(ctx, p)
	if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "so it was not moved") {
		t.Fatalf("a reset below the start: %v", err)
	}
	now := consumerInfo(t, s, "from10")
	if now.AckFloor.Stream != 14 || !now.Created.Equal(was.Created) || now.Config.OptStartSeq != 10 {
		t.Fatalf("a refused SetPosition changed the consumer: %+v", now)
	}
	if got := nextDelivered(t, b, "APP", "from10"); got != 15 {
		t.Fatalf("delivered %d next, want 15", got)
	}

	// A missing consumer that cannot be moved is not left made.
	last := jetstream.ConsumerConfig{Durable: "last", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverLastPolicy}
	appConsumer(t, s, last, 1)
	p = positionOf(t, b.a, "APP", "last")
	if err := s.DeleteConsumer(ctx, "last"); err != nil {
		t.Fatal(err)
	}
	err = b.a.SetPosition(ctx, p)
	if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "removed again") {
		t.Fatalf("a deliver_policy last consumer: %v", err)
	}
	if _, err := s.Consumer(ctx, "last"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the consumer made for a refused position is left: %v", err)
	}
}
