package jsbus_test

import (
	"errors"
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

// An act's id is its Nats-Msg-Id: recorded twice, it is stored once. The
// acts stream is made with the day-long duplicate window, and one made
// before with a shorter window (an older keeper's 2 minutes) is widened at
// start.
func TestActIDIsItsMsgIDAndTheDuplicateWindowIsADay(t *testing.T) {
	ctx := testCtx(t)
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEEPER_ACTS", Subjects: []string{"mesh-broker.acts.>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	a, err := jsbus.New(ctx, nc, jsbus.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KEEPER_ACTS")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Duplicates; got != 24*time.Hour {
		t.Fatalf("the acts stream's duplicate window is %s after start, want %s", got, jsbus.ActsDuplicates)
	}
	act := keeper.Act{ID: keeper.NewActID(), Verb: "snapshot-kept", What: "w", Outcome: "done", Time: time.Now()}
	for range 2 {
		if err := a.Record(ctx, act); err != nil {
			t.Fatal(err)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("an act recorded twice is stored %d times, want once", info.State.Msgs)
	}
	m, err := st.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != act.ID {
		t.Errorf("Nats-Msg-Id %q, want the act's id %s", got, act.ID)
	}
	if err := a.Record(ctx, keeper.Act{ID: "not plain", Verb: "x", Time: time.Now()}); !errors.Is(err, keeper.ErrBadRequest) {
		t.Errorf("an act whose id is not a plain name: %v, want ErrBadRequest", err)
	}
}
