package jsbus_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestDefaultReplicas: with no replicas configured, the keeper's index
// bucket and acts stream get 3 on a cluster of 3 and 1 on a single server;
// an existing R1 index on the cluster is raised to 3 when an adapter opens
// it.
func TestDefaultReplicas(t *testing.T) {
	t.Run("single server", func(t *testing.T) {
		nc := natstest.Connect(t, natstest.Start(t, nil))
		if _, err := jsbus.New(testCtx(t), nc, jsbus.WithLogger(quiet())); err != nil {
			t.Fatal(err)
		}
		checkReplicas(t, nc, 1, "KV_"+jsbus.DefaultBucket, jsbus.DefaultActsStream)
	})
	t.Run("cluster of 3", func(t *testing.T) {
		srvs := startCluster(t)
		nc := natstest.Connect(t, srvs[0])
		ctx := testCtx(t)
		newAdapter(t, ctx, nc, jsbus.WithReplicas(1))
		checkReplicas(t, nc, 1, "KV_"+jsbus.DefaultBucket, jsbus.DefaultActsStream)
		newAdapter(t, ctx, nc) // raises them
		checkReplicas(t, nc, 3, "KV_"+jsbus.DefaultBucket, jsbus.DefaultActsStream)
		newAdapter(t, ctx, nc, jsbus.WithBucket("fresh"), jsbus.WithPrefix("fresh"))
		checkReplicas(t, nc, 3, "KV_fresh", jsbus.ActsStreamFor("fresh"))
	})
}

// newAdapter opens an adapter on a cluster that may still be forming: a
// create of an R3 stream fails until the meta group has a leader and knows
// its peers, which the adapter's own retries ride out.
func newAdapter(t *testing.T, ctx context.Context, nc *nats.Conn, opts ...jsbus.Option) *jsbus.Adapter {
	t.Helper()
	a, err := jsbus.New(ctx, nc, append([]jsbus.Option{jsbus.WithLogger(quiet())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func checkReplicas(t *testing.T, nc *nats.Conn, want int, streams ...string) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range streams {
		s, err := js.Stream(testCtx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Replicas; got != want {
			t.Errorf("%s has %d replicas; want %d", name, got, want)
		}
	}
}

// TestVerbsRideOutALeaderElection stops the server that leads the index
// bucket, the acts stream and a kept stream, and at once uses every kind of
// request a verb makes through a server that stays: index reads and writes,
// a lease's create and update, an act, a stream lookup, a snapshot. Each
// waits out the election and succeeds; a request that can never succeed (a
// missing stream) still fails at once.
func TestVerbsRideOutALeaderElection(t *testing.T) {
	srvs := startCluster(t)
	ctx := testCtx(t)
	nc0 := natstest.Connect(t, srvs[0])
	newAdapter(t, ctx, nc0, jsbus.WithReplicas(3))
	js0, err := jetstream.New(nc0)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(ctx, js0, "billing", "ledger", sample.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	ledger := sample.NamesOf("billing", "ledger").Streams()[0]
	// Put every leader on one server, then connect through another.
	victim := srvs[1]
	for _, s := range []string{"KV_" + jsbus.DefaultBucket, jsbus.DefaultActsStream, ledger} {
		moveLeader(t, ctx, js0, s, victim.Name())
	}
	nc := natstest.Connect(t, srvs[2])
	a := newAdapter(t, ctx, nc, jsbus.WithReplicas(3))
	rev, err := a.Create(ctx, "lease-test", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}

	victim.Shutdown()
	began := time.Now()
	if err := a.Put(ctx, "plan.test", []byte(`{"streams":[]}`)); err != nil {
		t.Errorf("Put while the index elected a leader: %v", err)
	}
	if v, err := a.Get(ctx, "plan.test"); err != nil || string(v) != `{"streams":[]}` {
		t.Errorf("Get while the index elected a leader: %q, %v", v, err)
	}
	if _, err := a.Create(ctx, "lease-other", []byte("two")); err != nil {
		t.Errorf("Create while the index elected a leader: %v", err)
	}
	if _, err := a.Update(ctx, "lease-test", []byte("one, renewed"), rev); err != nil {
		t.Errorf("Update while the index elected a leader: %v", err)
	}
	if err := a.Record(ctx, keeper.Act{Verb: "snapshot-kept", Module: "billing", Local: "ledger", Outcome: "done"}); err != nil {
		t.Errorf("Record while the acts stream elected a leader: %v", err)
	}
	if _, err := a.Stream(ctx, ledger); err != nil {
		t.Errorf("Stream while %s elected a leader: %v", ledger, err)
	}
	var data, meta bytes.Buffer
	if err := a.Snapshot(ctx, ledger, nopCloser{&data}, nopCloser{&meta}); err != nil || data.Len() == 0 {
		t.Errorf("Snapshot while %s elected a leader: %d bytes, %v", ledger, data.Len(), err)
	}
	if keys, err := a.Keys(ctx, "lease-"); err != nil || !slices.Equal(keys, []string{"lease-other", "lease-test"}) {
		t.Errorf("Keys after the election: %v, %v", keys, err)
	}
	t.Logf("every request succeeded %s after the leaders' server stopped", time.Since(began).Round(time.Millisecond))

	quick := time.Now()
	if _, err := a.Stream(ctx, "no_such_stream"); !errors.Is(err, keeper.ErrNoStream) {
		t.Errorf("Stream of a missing stream: %v, want ErrNoStream", err)
	}
	if d := time.Since(quick); d > 5*time.Second {
		t.Errorf("a missing stream took %s to fail; it is not a failure that passes", d)
	}
}

// moveLeader makes the server named to the leader of stream.
func moveLeader(t *testing.T, ctx context.Context, js jetstream.JetStream, stream, to string) {
	t.Helper()
	for try := 0; try < 60; try++ {
		s, err := js.Stream(ctx, stream)
		if err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader == to {
			return
		}
		if err == nil {
			req := []byte(`{"placement":{"preferred":"` + to + `"}}`)
			js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, req)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s's leader did not move to %s", stream, to)
}

// TestConsumersListWithoutADeadServersEphemerals: ephemeral consumers whose
// only server died are listed as missing by the server; they are no one's
// position, so Consumers neither waits for them nor warns, and still lists
// the durable consumers whole.
func TestConsumersListWithoutADeadServersEphemerals(t *testing.T) {
	srvs := startCluster(t)
	ctx := testCtx(t)
	victim := srvs[1]
	ncV := natstest.Connect(t, victim)
	newAdapter(t, ctx, ncV, jsbus.WithReplicas(3))
	jsV, err := jetstream.New(ncV)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jsV.CreateStream(ctx, jetstream.StreamConfig{Name: "mixed", Subjects: []string{"mixed.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	moveLeader(t, ctx, jsV, "mixed", victim.Name())
	if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "keeps", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	// R1 ephemerals, made while the victim leads the stream, are placed on it.
	for range 4 {
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, Replicas: 1,
			InactiveThreshold: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	var logged syncbuf.Buffer
	a, err := jsbus.New(ctx, natstest.Connect(t, srvs[2]), jsbus.WithReplicas(3),
		jsbus.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	victim.Shutdown()
	var got []keeper.Position
	for try := 0; ; try++ { // the stream and consumer "keeps" elect new leaders
		got, err = everyConsumer(ctx, a)
		if err == nil && slices.ContainsFunc(got, func(p keeper.Position) bool { return p.Consumer == "keeps" }) {
			break
		}
		if try == 20 {
			t.Fatalf("Consumers after the victim stopped: %v, %v", got, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range got {
		if p.Stream == "mixed" && p.Consumer != "keeps" {
			t.Errorf("Consumers lists %s on mixed, which is not durable", p.Consumer)
		}
	}
	if strings.Contains(logged.String(), "did not answer the list") && strings.Contains(logged.String(), "stream=mixed") {
		t.Errorf("Consumers waited for and warned of consumers that are not durable:\n%s", logged.String())
	}
}
