package jsbus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

func TestDownstreamsFindsMirrorsAndSources(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "ORDERS", Subjects: []string{"orders.>"}},
		{Name: "PAYMENTS", Subjects: []string{"payments.>"}},
		{Name: "ORDERS_COPY", Mirror: &jetstream.StreamSource{Name: "ORDERS"}},
		{Name: "ALL", Sources: []*jetstream.StreamSource{{Name: "ORDERS"}, {Name: "PAYMENTS"}}},
		{Name: "SOME", Sources: []*jetstream.StreamSource{{Name: "ORDERS", FilterSubject: "orders.eu.>"}, {Name: "ORDERS", FilterSubject: "orders.us.>"}}},
		// ORDERS of another domain: not the one here.
		{Name: "FAR", Sources: []*jetstream.StreamSource{{Name: "ORDERS", External: &jetstream.ExternalStream{APIPrefix: "$JS.hub.API"}}}},
	} {
		if _, err := b.js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("create %s: %v", cfg.Name, err)
		}
	}
	check := func(what string) {
		t.Helper()
		got, err := b.a.Downstreams(ctx, []string{"ORDERS"})
		if err != nil {
			t.Fatal(err)
		}
		want := []keeper.Downstream{
			{Stream: "ALL", Kind: "source", Upstream: "ORDERS"},
			{Stream: "ORDERS_COPY", Kind: "mirror", Upstream: "ORDERS"},
			{Stream: "SOME", Kind: "source", Upstream: "ORDERS"},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: downstreams of ORDERS:\n%+v\nwant\n%+v", what, got, want)
		}
		got, err = b.a.Downstreams(ctx, []string{"PAYMENTS", "ALL"})
		if err != nil {
			t.Fatal(err)
		}
		if want := []keeper.Downstream{{Stream: "ALL", Kind: "source", Upstream: "PAYMENTS"}}; !slices.Equal(got, want) {
			t.Fatalf("%s: downstreams of PAYMENTS and ALL: %+v", what, got)
		}
		if got, err := b.a.Downstreams(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("%s: downstreams of none: %+v, %v", what, got, err)
		}
	}
	check("from the stream list (the census book is not seeded)")
	census(t, ctx, b.a)
	lists := countStreamLists(t, b.nc)
	check("from the census book")
	lists.none(t, "Downstreams from a seeded book")
}

func TestStreamConsumersTellsOrderedFromDurable(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	kv, err := b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "settings"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := kv.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for e := range w.Updates() { // the watcher has caught up
		if e == nil {
			break
		}
	}
	d, err := b.js.CreateConsumer(ctx, "KV_settings", jetstream.ConsumerConfig{Durable: "app", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := d.Fetch(2, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if n++; n == 1 {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	oc, err := b.js.OrderedConsumer(ctx, "KV_settings", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Next(jetstream.FetchMaxWait(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	eph, err := b.js.CreateConsumer(ctx, "KV_settings", jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	// nats.go's ordered consumer may make its consumer again (name _2 for
	// _1) when its first pull does not begin where it wants, and removes
	// the one it left on its own time: wait (bounded) until it has.
	got := settledConsumers(ctx, t, b.a, "KV_settings", oc.CachedInfo().Name)
	if len(got) != 4 {
		t.Fatalf("consumers %+v, want 4", got)
	}
	byName := map[string]keeper.ConsumerBrief{}
	var ordered int
	for _, c := range got {
		byName[c.Name] = c
		if c.Ordered {
			ordered++
			if c.Durable {
				t.Fatalf("%s is both durable and ordered", c.Name)
			}
		}
	}
	if c := byName["app"]; !c.Durable || c.Ordered || c.Delivered != 2 || c.AckFloor != 1 {
		t.Fatalf("the durable is %+v, want durable, not ordered, delivered 2, ack floor 1", c)
	}
	if c := byName[eph.CachedInfo().Name]; c.Durable || c.Ordered {
		t.Fatalf("the ephemeral that acks is %+v", c)
	}
	if ordered != 2 { // the watcher and the ordered consumer
		t.Fatalf("%d consumers look ordered, want the KV watcher and the ordered consumer: %+v", ordered, got)
	}
	if oci := oc.CachedInfo(); !byName[oci.Name].Ordered {
		t.Fatalf("the ordered consumer %s is not listed as one: %+v", oci.Name, got)
	}
	// A keeper's own read is not listed while it reads.
	err = b.a.Messages(ctx, "KV_settings", 1, 1, func(keeper.Message) error {
		during, err := b.a.StreamConsumers(ctx, "KV_settings")
		if err == nil && !slices.Equal(during, got) {
			err = fmt.Errorf("during a read the consumers are %+v", during)
		}
		if d, derr := b.a.StreamDetail(ctx, "KV_settings"); err == nil && derr != nil {
			err = derr
		} else if err == nil && d.Consumers != 5 {
			err = fmt.Errorf("during a read the stream counts %d consumers, want the 4 and the read's", d.Consumers)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.a.StreamConsumers(ctx, "GONE"); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("the consumers of a missing stream gave %v", err)
	}
}

// TestDownstreamsInADomain: a source through the API prefix of the
// adapter's own domain is this JetStream's stream; another domain's is not.
func TestDownstreamsInADomain(t *testing.T) {
	opts := natstest.Options(t.TempDir())
	opts.JetStreamDomain = "hub"
	tb := testbed.New(t, testbed.WithoutKeeper(), testbed.WithServer(opts),
		testbed.WithBusOptions(jsbus.WithLogger(quiet()), jsbus.WithDomain("hub")))
	ctx := testCtx(t)
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "ORDERS", Subjects: []string{"orders.>"}},
		{Name: "NEAR", Sources: []*jetstream.StreamSource{{Name: "ORDERS", External: &jetstream.ExternalStream{APIPrefix: "$JS.hub.API"}}}},
		{Name: "FAR", Mirror: &jetstream.StreamSource{Name: "ORDERS", External: &jetstream.ExternalStream{APIPrefix: "$JS.leaf.API"}}},
	} {
		if _, err := tb.JS.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("create %s: %v", cfg.Name, err)
		}
	}
	lists := countStreamLists(t, tb.Conn)
	for _, what := range []string{"from the stream list", "from the census book"} {
		lists.reset(t)
		got, err := tb.Bus.Downstreams(ctx, []string{"ORDERS"})
		if err != nil {
			t.Fatal(err)
		}
		if want := []keeper.Downstream{{Stream: "NEAR", Kind: "source", Upstream: "ORDERS"}}; !slices.Equal(got, want) {
			t.Fatalf("%s: downstreams of ORDERS in domain hub: %+v", what, got)
		}
		census(t, ctx, tb.Bus) // seeds the book for the second round
	}
	lists.none(t, "Downstreams from a seeded book, and a counted census")
}

// settledConsumers lists stream's consumers once no earlier consumer of
// the ordered consumer whose latest name is latest (<base>_<n>) is left,
// waiting at most 15 s for the server to remove them.
func settledConsumers(ctx context.Context, t *testing.T, a *jsbus.Adapter, stream, latest string) []keeper.ConsumerBrief {
	t.Helper()
	base := latest[:strings.LastIndex(latest, "_")+1]
	deadline := time.Now().Add(15 * time.Second)
	for {
		cs, err := a.StreamConsumers(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		left := slices.IndexFunc(cs, func(c keeper.ConsumerBrief) bool { return c.Name != latest && strings.HasPrefix(c.Name, base) })
		if left < 0 || base == "" {
			return cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("an earlier consumer of the ordered consumer %s is still there after 15 s: %+v", latest, cs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
