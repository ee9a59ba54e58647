package jsbus_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// downstreamsUntil is a.Downstreams(streams) once it gives want, asked
// again for at most 5 s: an update's advisory comes from the stream's own
// queue and may follow the reply to the update.
func downstreamsUntil(t *testing.T, ctx context.Context, a *jsbus.Adapter, want []keeper.Downstream, streams ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := a.Downstreams(ctx, streams)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("downstreams of %v: %+v, want %+v", streams, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameAsTheList fails the test unless the stream list gives want for
// streams.
func sameAsTheList(t *testing.T, ctx context.Context, a *jsbus.Adapter, want []keeper.Downstream, streams ...string) {
	t.Helper()
	got, err := jsbus.ListDownstreams(ctx, a, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the stream list gives the downstreams of %v as %+v, the book %+v", streams, got, want)
	}
}

// TestDownstreamsFromTheCensusBook: on a bus of 300 streams, once a census
// has seeded the book, Downstreams asks no page of the stream list and
// still finds a mirror made since, a source added to a stream by an
// update, and no longer a mirror deleted since: what the list finds.
func TestDownstreamsFromTheCensusBook(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	memoryStreams(t, ctx, b.js, 300)
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "old", Mirror: &jetstream.StreamSource{Name: "s001"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	census(t, ctx, b.a)
	lists := countStreamLists(t, b.nc)

	mirror := []keeper.Downstream{{Stream: "copy", Kind: "mirror", Upstream: "s010"}}
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "copy", Mirror: &jetstream.StreamSource{Name: "s010"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	downstreamsUntil(t, ctx, b.a, mirror, "s010")

	source := []keeper.Downstream{{Stream: "s020", Kind: "source", Upstream: "s030"}}
	if _, err := b.js.UpdateStream(ctx, jetstream.StreamConfig{Name: "s020", Subjects: []string{"s020"}, Storage: jetstream.MemoryStorage,
		Sources: []*jetstream.StreamSource{{Name: "s030"}}}); err != nil {
		t.Fatal(err)
	}
	downstreamsUntil(t, ctx, b.a, source, "s030")

	old := []keeper.Downstream{{Stream: "old", Kind: "mirror", Upstream: "s001"}}
	downstreamsUntil(t, ctx, b.a, append(slices.Clone(mirror), old...), "s001", "s010") // by stream: copy, old
	if err := b.js.DeleteStream(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	downstreamsUntil(t, ctx, b.a, old, "s001", "s010")
	lists.none(t, "Downstreams from a seeded book")

	sameAsTheList(t, ctx, b.a, old, "s001", "s010")
	sameAsTheList(t, ctx, b.a, source, "s030")
}

// TestDownstreamsListWhenTheBookCannotAnswer: a keeper that cannot hear
// the advisories, and one whose advisories were dropped, list every stream
// and find what the book would.
func TestDownstreamsListWhenTheBookCannotAnswer(t *testing.T) {
	ctx := testCtx(t)
	want := []keeper.Downstream{{Stream: "copy", Kind: "mirror", Upstream: "orders"}, {Stream: "sum", Kind: "source", Upstream: "orders"}}
	made := func(t *testing.T, js jetstream.JetStream) {
		t.Helper()
		makeStreams(t, ctx, js, "orders", "other")
		for _, cfg := range []jetstream.StreamConfig{
			{Name: "copy", Mirror: &jetstream.StreamSource{Name: "orders"}},
			{Name: "sum", Sources: []*jetstream.StreamSource{{Name: "orders"}, {Name: "other"}}},
		} {
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("unheard", func(t *testing.T) {
		a, admin := unhearingKeeper(t, ctx)
		census(t, ctx, a)
		js, _ := jetstream.New(admin)
		made(t, js)
		lists := countStreamLists(t, admin)
		downstreamsUntil(t, ctx, a, want, "orders")
		if lists.count(t) == 0 {
			t.Error("a keeper that cannot hear the advisories did not list the streams")
		}
	})
	t.Run("dropped", func(t *testing.T) {
		b := newBus(t)
		census(t, ctx, b.a)
		if err := jsbus.SetAdvisoryLimit(b.a, 1); err != nil {
			t.Fatal(err)
		}
		made(t, b.js)
		if err := jsbus.WaitDropped(b.a); err != nil {
			t.Fatal(err)
		}
		lists := countStreamLists(t, b.nc)
		downstreamsUntil(t, ctx, b.a, want, "orders")
		if lists.count(t) == 0 {
			t.Error("Downstreams after advisories were dropped did not list the streams")
		}
		// A full census seeds the book again: the next one asks no list.
		census(t, ctx, b.a)
		lists.reset(t)
		downstreamsUntil(t, ctx, b.a, want, "orders")
		lists.none(t, "Downstreams after a full census")
	})
}
