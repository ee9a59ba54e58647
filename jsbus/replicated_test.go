package jsbus_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestClusterRestoredStreamNotOnAMajority: a restored R3 stream counts as
// restored once its leader holds the restored data and a majority of its
// peers are current. A leader that holds less than the restore ended with,
// or no leader at all (the server that took the restore died before the
// others held it), is a restore the bus cut short (keeper.ErrNoBus), so
// that the executor removes the stream and restores it again.
func TestClusterRestoredStreamNotOnAMajority(t *testing.T) {
	srvs, ctx, js, a := clusterBus(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "held", Subjects: []string{"held"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := js.Publish(ctx, "held", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	if err := jsbus.AwaitReplicated(ctx, a, "held", 3, 5); err != nil {
		t.Fatalf("an R3 stream whose leader holds all 5 messages: %v; want it taken as restored", err)
	}
	// A replica counts once its leader heard from it 0.5 s after the
	// restore ended, not on what it answered before.
	if took := time.Since(began); took < 500*time.Millisecond {
		t.Errorf("the replicas were counted after %s, before any could answer 0.5 s after the restore", took)
	}
	err := jsbus.AwaitReplicated(ctx, a, "held", 3, 9)
	if !errors.Is(err, keeper.ErrNoBus) || !strings.Contains(err.Error(), "which holds it up to sequence 5 and not 9") {
		t.Fatalf("a leader holding less than the restore ended with: %v; want an error wrapping ErrNoBus that says so", err)
	}
	if err := jsbus.AwaitReplicated(ctx, a, "absent", 1, 9); err != nil {
		t.Fatalf("an R1 stream is not waited for: %v", err)
	}
	// Left alone, a follower has no leader: the leader and the other
	// replica are gone, as a server that took a restore and died would be.
	st, err := js.Stream(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	leader := st.CachedInfo().Cluster.Leader
	var survivor int
	for i, s := range srvs {
		if s.Name() != leader {
			survivor = i
		}
	}
	short, err := jsbus.New(ctx, natstest.Connect(t, srvs[survivor]), jsbus.WithLogger(quiet()), jsbus.WithReplicas(3),
		jsbus.WithTimeout(2*time.Second), jsbus.WithAttemptTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range srvs {
		if i != survivor {
			s.Shutdown()
		}
	}
	err = jsbus.AwaitReplicated(ctx, short, "held", 3, 5)
	if !errors.Is(err, keeper.ErrNoBus) || !strings.Contains(err.Error(), "had no leader holding it for 2s") {
		t.Fatalf("a stream with no leader after its restore: %v; want an error wrapping ErrNoBus that says so", err)
	}
}
