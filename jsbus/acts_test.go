package jsbus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestKeepersWithOwnPrefixesKeepTheirActsApart: a second keeper on the bus
// with its own bucket and prefix gets an acts stream of its own, and each
// act lands in its keeper's stream.
func TestKeepersWithOwnPrefixesKeepTheirActsApart(t *testing.T) {
	ctx := testCtx(t)
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	first, err := jsbus.New(ctx, nc, jsbus.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	second, err := jsbus.New(ctx, nc, jsbus.WithLogger(quiet()), jsbus.WithBucket("kept2"), jsbus.WithPrefix("other.keeper"))
	if err != nil {
		t.Fatalf("a second keeper with its own bucket and prefix: %v", err)
	}
	for _, a := range []*jsbus.Adapter{first, second} {
		if err := a.Record(ctx, keeper.Act{Verb: "list-kept", What: "w", Outcome: "done", Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	js, _ := jetstream.New(nc)
	for _, name := range []string{"KEEPER_ACTS", "KEEPER_ACTS_other_keeper"} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("acts stream %s: %v", name, err)
		}
		if n := st.CachedInfo().State.Msgs; n != 1 {
			t.Errorf("acts stream %s holds %d acts, want 1", name, n)
		}
	}
	if got := jsbus.ActsStreamFor("mesh-broker"); got != "KEEPER_ACTS" {
		t.Errorf("ActsStreamFor(mesh-broker) = %s", got)
	}
}
