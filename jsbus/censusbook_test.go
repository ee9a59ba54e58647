package jsbus_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestFullCensusIsSharedByTheCensusesWaiting: eight censuses that find
// the book not yet made wait for one full census, made once in the
// background, and each lists what a full census does.
func TestFullCensusIsSharedByTheCensusesWaiting(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	makeStreams(t, ctx, b.js, "p", "q")
	durableOn(t, ctx, b.js, "q", "c")
	lists := countStreamLists(t, b.nc)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, ps, err := b.a.Census(ctx, keeper.CensusQuery{Every: true})
			if err == nil && len(ps) != 1 {
				err = fmt.Errorf("listed %v, want q/c", consumerKeys(ps))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("census %d: %v", i, err)
		}
	}
	if n := lists.count(t); n != 1 {
		t.Errorf("8 censuses at once asked %d pages of the full stream list, want 1 (one full census, shared)", n)
	}
}

// TestCensusBookKeepsOwners: the book holds each consumer with the owner
// its metadata declares, from the full census and then from the
// advisories: a consumer made, deleted, or deleted and made again with
// other metadata between two censuses is held as the bus holds it.
func TestCensusBookKeepsOwners(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	makeStreams(t, ctx, b.js, "s")
	made := func(name string, md map[string]string) {
		t.Helper()
		if _, err := b.js.CreateConsumer(ctx, "s", jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	deleted := func(name string) {
		t.Helper()
		if err := b.js.DeleteConsumer(ctx, "s", name); err != nil {
			t.Fatal(err)
		}
	}
	made("before", map[string]string{keeper.MetaModule: "m", keeper.MetaLocal: "l"})
	made("plain", nil)
	want := func(what string, owners map[string]string) {
		t.Helper()
		census(t, ctx, b.a)
		_, got := jsbus.CensusBook(b.a)
		if fmt.Sprint(got) != fmt.Sprint(owners) {
			t.Errorf("%s: the book holds %v, want %v", what, got, owners)
		}
	}
	want("after the full census", map[string]string{"s/before": "m/l", "s/plain": "/"})

	made("after", map[string]string{keeper.MetaModule: "n"})
	deleted("plain")
	want("after a consumer was made and another deleted", map[string]string{"s/before": "m/l", "s/after": "n/"})

	deleted("before")
	made("before", map[string]string{keeper.MetaModule: "o", keeper.MetaLocal: "k"})
	made("brief", nil)
	deleted("brief")
	want("after a consumer was made again with other metadata, and another made and deleted", map[string]string{"s/before": "o/k", "s/after": "n/"})

	if err := b.js.DeleteStream(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	want("after the stream was deleted", map[string]string{})
}

// TestCensusBookTakesAnUpdateAtItsRefresh: on a single server the update
// of a consumer sends no advisory, so the book holds its old metadata
// until it is made again; once it is older than its refresh age, a census
// makes it again in the background, and a later census of the module the
// new metadata names lists the consumer. (The census is asked again until
// the background census is in, for at most 10 s.)
func TestCensusBookTakesAnUpdateAtItsRefresh(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	makeStreams(t, ctx, b.js, "u")
	cfg := jetstream.ConsumerConfig{Durable: "plain", AckPolicy: jetstream.AckExplicitPolicy}
	if _, err := b.js.CreateOrUpdateConsumer(ctx, "u", cfg); err != nil {
		t.Fatal(err)
	}
	q := keeper.CensusQuery{Module: "m"}
	census := func() []string {
		t.Helper()
		_, ps, err := b.a.Census(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return consumerKeys(ps)
	}
	census()
	cfg.Metadata = map[string]string{keeper.MetaModule: "m"}
	if _, err := b.js.CreateOrUpdateConsumer(ctx, "u", cfg); err != nil {
		t.Fatal(err)
	}
	if got := census(); len(got) != 0 {
		t.Fatalf("the census lists %v after an update no advisory told (the server sends none), want nothing yet: has the server changed?", got)
	}
	jsbus.SetCensusRefresh(b.a, time.Millisecond)
	for try := 0; !slices.Contains(census(), "u/plain"); try++ {
		if try == 200 {
			t.Fatal("the census of module m never listed u/plain after its metadata named m and the book was past its refresh age")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
