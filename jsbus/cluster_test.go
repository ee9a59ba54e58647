package jsbus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// startCluster starts a three-node JetStream cluster in this process.
func startCluster(t *testing.T) []*server.Server {
	t.Helper()
	return natstest.Cluster(t, "keeper", 3)
}

// clusterBus starts a three-node cluster and gives its servers, the test's
// context, a JetStream client through the first server and an R3 adapter
// on the same connection.
func clusterBus(t *testing.T) ([]*server.Server, context.Context, jetstream.JetStream, *jsbus.Adapter) {
	t.Helper()
	srvs := startCluster(t)
	ctx := testCtx(t)
	nc := natstest.Connect(t, srvs[0])
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return srvs, ctx, js, clusterAdapter(t, ctx, nc)
}

// TestClusterSnapshotRestoreKeepsReplicas takes R3 streams' snapshots through
// one node, removes the streams, restores them and sets a position back: the
// streams come back with three replicas and exactly their content.
func TestClusterSnapshotRestoreKeepsReplicas(t *testing.T) {
	_, ctx, js, a := clusterBus(t)
	if err := sample.Create(ctx, js, "billing", "ledger", sample.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	n := sample.NamesOf("billing", "ledger")
	before, err := sample.Dump(ctx, js, n.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range before.Streams {
		if d.Replicas != 3 {
			t.Fatalf("%s has %d replicas", d.Name, d.Replicas)
		}
	}
	positions := positionsOf(t, a, n)
	shared, err := sample.Dump(ctx, js, sample.SharedStream)
	if err != nil {
		t.Fatal(err)
	}
	type arc struct{ data, meta []byte }
	arcs := map[string]arc{}
	for _, s := range n.Streams() {
		d, m := snapshot(t, a, s)
		arcs[s] = arc{d, m}
	}
	if err := sample.Change(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	for _, s := range n.Streams() {
		if err := a.DeleteStream(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := a.Restore(ctx, s, bytes.NewReader(arcs[s].data), bytes.NewReader(arcs[s].meta)); err != nil {
			t.Fatalf("restore %s: %v", s, err)
		}
		// Restore returns once the restored consumers answer: the server
		// answers the restore before it has assigned them.
		st, err := js.Stream(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		l := st.ListConsumers(ctx)
		for ci := range l.Info() {
			got = append(got, ci.Name)
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		for _, d := range before.Streams {
			if d.Name == s {
				for _, c := range d.Consumers {
					want = append(want, c.Name)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("right after the restore of %s its consumers are listed as %v, want %v", s, got, want)
		}
		// The cluster's stream assignments answer which streams take a
		// subject (a restore's overlap check asks it).
		if subj := st.CachedInfo().Config.Subjects; len(subj) > 0 {
			taking, err := a.StreamsTaking(ctx, subj[0])
			if err != nil || !slices.Contains(taking, s) {
				t.Errorf("streams taking %s on the cluster: %v %v, want %s among them", subj[0], taking, err, s)
			}
		}
	}
	var events keeper.Position
	for _, p := range positions {
		if p.Stream == sample.SharedStream {
			events = p
		}
	}
	// The live R3 consumer is reset through its raft group: its own ack
	// floor (not only its delivered sequence) reads the position at once.
	if err := a.SetPosition(ctx, events); err != nil {
		t.Fatal(err)
	}
	sharedStream, err := js.Stream(ctx, sample.SharedStream)
	if err != nil {
		t.Fatal(err)
	}
	info := func() *jetstream.ConsumerInfo {
		t.Helper()
		ci, err := sharedStream.Consumer(ctx, n.Events)
		if err != nil {
			t.Fatal(err)
		}
		return ci.CachedInfo()
	}
	if ci := info(); ci.AckFloor.Stream != events.AckFloor || ci.Delivered.Stream != events.AckFloor || ci.NumAckPending != 0 {
		t.Fatalf("%s after a reset: ack floor %d, delivered %d, %d pending; want %d", n.Events,
			ci.AckFloor.Stream, ci.Delivered.Stream, ci.NumAckPending, events.AckFloor)
	}
	// A missing R3 consumer is made from its recorded configuration and
	// reset once it has a leader.
	if err := sharedStream.DeleteConsumer(ctx, n.Events); err != nil {
		t.Fatal(err)
	}
	// Until the deletion has reached every server, a consumer info may go
	// unanswered; the position is set once the consumer is gone.
	for {
		_, err := sharedStream.Consumer(ctx, n.Events)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s is still on the bus after its deletion: %v", n.Events, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.SetPosition(ctx, events); err != nil {
		t.Fatal(err)
	}
	if ci := info(); ci.AckFloor.Stream != events.AckFloor || ci.Config.Replicas != 3 || ci.Cluster == nil || len(ci.Cluster.Replicas) != 2 {
		t.Fatalf("%s made again: ack floor %d (want %d), replicas %d, cluster %+v", n.Events,
			ci.AckFloor.Stream, events.AckFloor, ci.Config.Replicas, ci.Cluster)
	}
	after, err := sample.Dump(ctx, js, n.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, after); d != "" {
		t.Fatalf("restored R3 streams differ:\n%s", d)
	}
	sharedAfter, err := sample.Dump(ctx, js, sample.SharedStream)
	if err != nil {
		t.Fatal(err)
	}
	was := consumerOf(t, shared, sample.SharedStream, n.Events)
	now := consumerOf(t, sharedAfter, sample.SharedStream, n.Events)
	if now.AckFloor != was.AckFloor || now.Next != was.Next {
		t.Fatalf("%s after SetPosition: %+v, was %+v", n.Events, now, was)
	}
	if got := nextDelivered(t, &bus{js: js}, sample.SharedStream, n.Events); got != was.Next {
		t.Fatalf("%s delivered %d next, want %d", n.Events, got, was.Next)
	}
	// Read back, the re-made consumer's position is the one that was set.
	for _, p := range positionsOf(t, a, n) {
		if p.Stream == sample.SharedStream && p.AckFloor != was.AckFloor {
			t.Fatalf("position of %s read back as %d with one message unacked, want %d", p.Consumer, p.AckFloor, was.AckFloor)
		}
	}
}

// TestClusterCensusSeesConsumersMadeThroughAnotherServer: on a cluster a
// consumer's advisory comes from its leader, after its create was
// answered, so it may reach the keeper's server after the census began. A
// consumer made through another server just before each census is still
// listed (the account's totals count it), and one deleted just before is
// not. So is a stream, whose advisory comes the same way.
func TestClusterCensusSeesConsumersMadeThroughAnotherServer(t *testing.T) {
	srvs := startCluster(t)
	ctx := testCtx(t)
	nc := natstest.Connect(t, srvs[0])
	a := clusterAdapter(t, ctx, nc)
	ojs, err := jetstream.New(natstest.Connect(t, srvs[2]))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"c1", "c2"} {
		if _, err := ojs.CreateStream(ctx, jetstream.StreamConfig{Name: s, Subjects: []string{s}, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := a.Census(ctx, keeper.CensusQuery{Every: true}); err != nil { // the first, full one
		t.Fatal(err)
	}
	for i := range 10 {
		stream := []string{"c1", "c2"}[i%2]
		name := fmt.Sprintf("d%02d", i)
		if _, err := ojs.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		_, ps, err := a.Census(ctx, keeper.CensusQuery{Every: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(consumerKeys(ps), stream+"/"+name) {
			t.Errorf("the consumer %s/%s made through another server just before the census is not listed: %v", stream, name, consumerKeys(ps))
		}
		if i%3 == 2 {
			if err := ojs.DeleteConsumer(ctx, stream, name); err != nil {
				t.Fatal(err)
			}
			_, ps, err := a.Census(ctx, keeper.CensusQuery{Every: true})
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(consumerKeys(ps), stream+"/"+name) {
				t.Errorf("the consumer %s/%s deleted just before the census is listed", stream, name)
			}
		}
	}
	for i := range 4 {
		name := fmt.Sprintf("n%d", i)
		if _, err := ojs.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
		names, _, err := a.Census(ctx, keeper.CensusQuery{Every: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(names, name) {
			t.Errorf("the stream %s made through another server just before the census is not named: %v", name, names)
		}
		if err := ojs.DeleteStream(ctx, name); err != nil {
			t.Fatal(err)
		}
		if names, _, err = a.Census(ctx, keeper.CensusQuery{Every: true}); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(names, name) {
			t.Errorf("the stream %s deleted through another server just before the census is named", name)
		}
	}
}

// clusterAdapter is an adapter with R3 buckets on a cluster that may still
// be forming: the first R3 create fails until it has a meta leader and
// peers, so it is tried again for up to 30 s.
func clusterAdapter(t *testing.T, ctx context.Context, nc *nats.Conn) *jsbus.Adapter {
	t.Helper()
	for i := 0; ; i++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		a, err := jsbus.New(actx, nc, jsbus.WithLogger(quiet()), jsbus.WithReplicas(3))
		cancel()
		if err == nil {
			return a
		}
		if i == 120 {
			t.Fatalf("the cluster did not take an R3 bucket: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestClusterCensusHearsAConsumersNewMetadata: on a cluster the update of
// a single-replica consumer is answered as its creation, with the consumer
// created advisory sent again, so the census book reads the consumer again:
// metadata naming a module, given by an update, makes a census of that
// module list it. (The advisory comes after the update's reply: the census
// is asked again until it is heard, for at most 10 s.)
func TestClusterCensusHearsAConsumersNewMetadata(t *testing.T) {
	srvs := startCluster(t)
	ctx := testCtx(t)
	a := clusterAdapter(t, ctx, natstest.Connect(t, srvs[0]))
	ojs, err := jetstream.New(natstest.Connect(t, srvs[1]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ojs.CreateStream(ctx, jetstream.StreamConfig{Name: "u", Subjects: []string{"u"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.ConsumerConfig{Durable: "plain", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1}
	if _, err := ojs.CreateOrUpdateConsumer(ctx, "u", cfg); err != nil {
		t.Fatal(err)
	}
	q := keeper.CensusQuery{Module: "m"}
	if _, ps, err := a.Census(ctx, q); err != nil || len(ps) != 0 {
		t.Fatalf("before the update the census of module m lists %v (%v), want nothing", ps, err)
	}
	cfg.Metadata = map[string]string{keeper.MetaModule: "m"}
	if _, err := ojs.CreateOrUpdateConsumer(ctx, "u", cfg); err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		_, ps, err := a.Census(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(consumerKeys(ps), "u/plain") {
			break
		}
		if try == 200 {
			t.Fatalf("the census of module m never listed u/plain after its metadata named m: %v", consumerKeys(ps))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, owners := jsbus.CensusBook(a); owners["u/plain"] != "m/" {
		t.Errorf("the census book holds u/plain as %q's, want m's", owners["u/plain"])
	}
}
