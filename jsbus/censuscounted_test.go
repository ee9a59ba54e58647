package jsbus_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// streamLists counts the pages of the full stream list asked of the bus
// nc is connected to, from the call on.
type streamLists struct {
	nc   *nats.Conn
	sub  *nats.Subscription
	base int
}

func countStreamLists(t *testing.T, nc *nats.Conn) *streamLists {
	t.Helper()
	return countRequests(t, nc, "$JS.API.STREAM.LIST")
}

// countRequests counts the requests on subject, as countStreamLists does.
func countRequests(t *testing.T, nc *nats.Conn, subject string) *streamLists {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &streamLists{nc: nc, sub: sub}
}

// count is how many were asked since the count began or was reset: the
// flush brings every request the server passed on before it.
func (l *streamLists) count(t *testing.T) int {
	t.Helper()
	if err := l.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	n, _, err := l.sub.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return n - l.base
}

func (l *streamLists) reset(t *testing.T) { l.base += l.count(t) }

// none fails the test if who asked any since the count began or was reset.
func (l *streamLists) none(t *testing.T, who string) {
	t.Helper()
	if n := l.count(t); n != 0 {
		t.Errorf("%s asked %s %d times, want none", who, l.sub.Subject, n)
	}
}

// fullCensus is what Streams and Consumers say, the truth a census must
// match.
func fullCensus(t *testing.T, ctx context.Context, a *jsbus.Adapter) ([]string, []keeper.Position) {
	t.Helper()
	streams, err := a.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range streams {
		names = append(names, s.Name)
	}
	ps, err := a.Consumers(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names, ps
}

// census is a.Census, sorted, or fails the test.
func census(t *testing.T, ctx context.Context, a *jsbus.Adapter) ([]string, []keeper.Position) {
	t.Helper()
	names, ps, err := a.Census(ctx, keeper.CensusQuery{Every: true})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names, ps
}

func consumerKeys(ps []keeper.Position) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Stream+"/"+p.Consumer)
	}
	return out
}

// sameCensus fails the test unless a's census equals a full one.
func sameCensus(t *testing.T, ctx context.Context, a *jsbus.Adapter, what string) {
	t.Helper()
	names, ps := census(t, ctx, a)
	wantNames, wantPs := fullCensus(t, ctx, a)
	if !slices.Equal(names, wantNames) {
		t.Errorf("%s: the census names %v, the full list %v", what, names, wantNames)
	}
	if got, want := consumerKeys(ps), consumerKeys(wantPs); !slices.Equal(got, want) {
		t.Errorf("%s: the census lists %v, the full list %v", what, got, want)
	}
}

// makeStreams makes a file stream of each name, taking its own name as
// subject.
func makeStreams(t *testing.T, ctx context.Context, js jetstream.JetStream, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: n, Subjects: []string{n}}); err != nil {
			t.Fatal(err)
		}
	}
}

// memoryStreams makes n memory streams, s000 on, each taking its own name
// as subject.
func memoryStreams(t *testing.T, ctx context.Context, js jetstream.JetStream, n int) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}, Storage: jetstream.MemoryStorage}); err != nil {
			t.Fatal(err)
		}
	}
}

func durableOn(t *testing.T, ctx context.Context, js jetstream.JetStream, stream, name string) {
	t.Helper()
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
}

// TestCensusSeesEveryStreamAndConsumerWithoutTheFullList: after its first
// census (a full one), a census of 300 streams asks no page of the full
// stream list nor of the stream names, and a stream or consumer made or
// deleted just before it is named or not, as a full census says.
func TestCensusSeesEveryStreamAndConsumerWithoutTheFullList(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	memoryStreams(t, ctx, b.js, 300)
	durableOn(t, ctx, b.js, "s000", "c0")
	sameCensus(t, ctx, b.a, "first census")
	lists := countStreamLists(t, b.nc)
	nameLists := countRequests(t, b.nc, "$JS.API.STREAM.NAMES")

	durableOn(t, ctx, b.js, "s150", "c150") // a stream that had no consumer
	makeStreams(t, ctx, b.js, "late")
	durableOn(t, ctx, b.js, "late", "c-late")
	names, ps := census(t, ctx, b.a)
	if !slices.Contains(names, "late") {
		t.Error("the census does not name the stream made just before it")
	}
	for _, c := range []string{"s000/c0", "s150/c150", "late/c-late"} {
		if !slices.Contains(consumerKeys(ps), c) {
			t.Errorf("the census does not list %s (it lists %v)", c, consumerKeys(ps))
		}
	}
	lists.none(t, "the census")

	if err := b.js.DeleteConsumer(ctx, "s150", "c150"); err != nil {
		t.Fatal(err)
	}
	// nats-server 2.15.3 sometimes sends no STREAM.DELETED advisory at all
	// (4 deletes of 40 here; a subscriber waiting 3 s for it got none).
	// The census must then find the deletion by the account's totals and
	// list every stream: a full census, the right answer. So the census
	// must ask no list only when the advisory was sent.
	deleted, err := b.nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.DELETED.late")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.js.DeleteStream(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	_, lost := deleted.NextMsg(3 * time.Second)
	names, ps = census(t, ctx, b.a)
	if slices.Contains(names, "late") || slices.Contains(consumerKeys(ps), "s150/c150") || slices.Contains(consumerKeys(ps), "late/c-late") {
		t.Errorf("the census names what was deleted just before it: %v %v", names, consumerKeys(ps))
	}
	if lost == nil {
		lists.none(t, "the census")
	} else if lists.count(t) == 0 {
		t.Errorf("the server sent no advisory of the deleted stream (%v), yet the census listed no stream to find the deletion", lost)
	}
	nameLists.none(t, "the censuses")
	lists.reset(t)
	sameCensus(t, ctx, b.a, "after the deletes")
}

// TestCensusNamesAStreamMadeAgain: a stream deleted and made again between
// two censuses (as a restore does), with a consumer made on it last, is
// named, and its consumer listed, by the next census, which lists no stream
// to find them. (Taking the deletions after the consumer's advisory lost
// the consumer once.)
func TestCensusNamesAStreamMadeAgain(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	makeStreams(t, ctx, b.js, "again", "other")
	sameCensus(t, ctx, b.a, "first census")
	lists := countStreamLists(t, b.nc)
	for range 3 {
		if err := b.js.DeleteStream(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		makeStreams(t, ctx, b.js, "again")
	}
	durableOn(t, ctx, b.js, "again", "made-again")
	names, ps := census(t, ctx, b.a)
	if !slices.Contains(names, "again") || !slices.Contains(names, "other") || !slices.Contains(consumerKeys(ps), "again/made-again") {
		t.Errorf("after a stream was deleted and made again the census names %v and lists %v", names, consumerKeys(ps))
	}
	lists.none(t, "the census")
	lists.reset(t)
	sameCensus(t, ctx, b.a, "after the stream was made again")
}

// TestCensusAfterALostStreamAdvisory: a stream whose advisory was lost (the
// connection never noticed) is still named: the account's totals count it,
// so the census is made in full, and the one after it is light again.
func TestCensusAfterALostStreamAdvisory(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	makeStreams(t, ctx, b.js, "seen")
	sameCensus(t, ctx, b.a, "first census")
	makeStreams(t, ctx, b.js, "unheard")
	if err := jsbus.LoseStreamAdvisory(b.a, "unheard"); err != nil {
		t.Fatal(err)
	}
	lists := countStreamLists(t, b.nc)
	names, _ := census(t, ctx, b.a)
	if !slices.Contains(names, "unheard") {
		t.Errorf("the stream whose advisory was lost is not named: %v", names)
	}
	if lists.count(t) == 0 {
		t.Error("the census did not fall back to the full stream list")
	}
	lists.reset(t)
	sameCensus(t, ctx, b.a, "after the full census")
	if n := lists.count(t); n != 1 { // sameCensus's own full list, one page
		t.Errorf("the census after the full one asked %d pages of the full stream list, want none (and 1 for the check)", n)
	}
}

// TestCensusAfterLostAdvisories: a consumer whose advisory was lost (the
// connection never noticed) is still listed: the account's totals count
// it, so the census is made in full.
func TestCensusAfterLostAdvisories(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	makeStreams(t, ctx, b.js, "a", "b")
	sameCensus(t, ctx, b.a, "first census")
	durableOn(t, ctx, b.js, "b", "lost")
	if err := jsbus.LoseAdvisories(b.a, "b"); err != nil {
		t.Fatal(err)
	}
	lists := countStreamLists(t, b.nc)
	_, ps := census(t, ctx, b.a)
	if !slices.Contains(consumerKeys(ps), "b/lost") {
		t.Errorf("the consumer whose advisory was lost is not listed: %v", consumerKeys(ps))
	}
	if lists.count(t) == 0 {
		t.Error("the census did not fall back to the full stream list")
	}
	// The full census seeded the watch again: the next one is light.
	lists.reset(t)
	sameCensus(t, ctx, b.a, "after the full census")
}

// TestCensusAfterReconnect: advisories sent while the connection was down
// are lost, so the first census after a reconnect is a full one, and it
// lists a consumer made while the keeper was away.
func TestCensusAfterReconnect(t *testing.T) {
	ctx := testCtx(t)
	r := newRestartable(t, ctx)
	js, _ := jetstream.New(r.nc)
	makeStreams(t, ctx, js, "w")
	census(t, ctx, r.a)
	r.stop()
	// The consumer is made on the new server, perhaps before the keeper's
	// connection is back: its advisory may be lost, and the first census
	// after the reconnect is a full one either way.
	other := natstest.Connect(t, r.start(t))
	ojs, _ := jetstream.New(other)
	durableOn(t, ctx, ojs, "w", "made-away")
	r.waitConnected(t)
	lists := countStreamLists(t, other)
	_, ps := census(t, ctx, r.a)
	if !slices.Contains(consumerKeys(ps), "w/made-away") {
		t.Errorf("the consumer made while the keeper was away is not listed: %v", consumerKeys(ps))
	}
	if lists.count(t) == 0 {
		t.Error("the first census after a reconnect did not list every stream")
	}
}

// TestCensusWithoutAdvisories: a keeper whose user may not subscribe to the
// advisories lists every stream at every census, and sees every consumer.
func TestCensusWithoutAdvisories(t *testing.T) {
	ctx := testCtx(t)
	a, admin := unhearingKeeper(t, ctx)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	makeStreams(t, ctx, js, "x")
	census(t, ctx, a)
	lists := countStreamLists(t, admin)
	totals := countRequests(t, admin, "$JS.API.INFO")
	for i := range 3 {
		name := fmt.Sprintf("c%d", i)
		durableOn(t, ctx, js, "x", name)
		_, ps := census(t, ctx, a)
		if !slices.Contains(consumerKeys(ps), "x/"+name) {
			t.Errorf("census %d does not list x/%s: %v", i, name, consumerKeys(ps))
		}
	}
	if n := lists.count(t); n < 3 {
		t.Errorf("3 censuses without advisories asked %d pages of the full stream list, want one each", n)
	}
	if n := totals.count(t); n != 0 {
		t.Errorf("censuses that cannot hear the advisories read the account's totals %d times, want none: they list every stream at once", n)
	}
}

// unhearingKeeper is an adapter whose user may not subscribe to the
// advisories, and an admin connection to the same server.
func unhearingKeeper(t *testing.T, ctx context.Context) (*jsbus.Adapter, *nats.Conn) {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	all := &server.SubjectPermission{Allow: []string{">"}}
	opts.Users = []*server.User{
		{Username: "keeper", Password: "k", Permissions: &server.Permissions{Publish: all,
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}}}},
		{Username: "admin", Password: "a"},
	}
	s := natstest.Start(t, opts)
	nc := natstest.Connect(t, s, nats.UserInfo("keeper", "k"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	admin := natstest.Connect(t, s, nats.UserInfo("admin", "a"))
	a, err := jsbus.New(ctx, nc, jsbus.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	return a, admin
}

// TestCensusAfterDroppedAdvisories: advisories dropped past the pending
// limit make the next census a full one, which lists every consumer.
func TestCensusAfterDroppedAdvisories(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	makeStreams(t, ctx, b.js, "d")
	census(t, ctx, b.a)
	if err := jsbus.SetAdvisoryLimit(b.a, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		durableOn(t, ctx, b.js, "d", fmt.Sprintf("c%d", i))
	}
	if err := jsbus.WaitDropped(b.a); err != nil {
		t.Fatal(err)
	}
	// Back to a limit nothing here reaches: the four durables' advisories
	// still on their way must not be dropped after the full census below
	// (one was, now and then, and made the census after it full again).
	if err := jsbus.SetAdvisoryLimit(b.a, 8192); err != nil {
		t.Fatal(err)
	}
	lists := countStreamLists(t, b.nc)
	totals := countRequests(t, b.nc, "$JS.API.INFO")
	_, ps := census(t, ctx, b.a)
	for i := range 4 {
		if c := fmt.Sprintf("d/c%d", i); !slices.Contains(consumerKeys(ps), c) {
			t.Errorf("%s is not listed after advisories were dropped: %v", c, consumerKeys(ps))
		}
	}
	// A full census at once, then the book it made, checked against the
	// totals once (before and after its lists).
	if lists.count(t) == 0 || totals.count(t) != 2 {
		t.Errorf("after dropped advisories the census asked %d pages of the full list and read the totals %d times, want a full census at once and then 2",
			lists.count(t), totals.count(t))
	}
	// The full census emptied the queues, so the one after it is light
	// again, and hears a consumer made since.
	durableOn(t, ctx, b.js, "d", "after")
	lists.reset(t)
	_, ps = census(t, ctx, b.a)
	if !slices.Contains(consumerKeys(ps), "d/after") {
		t.Errorf("d/after is not listed by the census after the full one: %v", consumerKeys(ps))
	}
	if n := lists.count(t); n != 0 {
		t.Errorf("the census after the full one asked %d pages of the full stream list, want none (the queues stayed full?)", n)
	}
}

// TestStreamsTaking: the streams whose subjects overlap a subject, by the
// server's matching (wildcards either side), and no other; an empty
// subject is refused rather than taken as "every stream".
func TestStreamsTaking(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	for name, subjects := range map[string][]string{
		"orders":  {"shop.orders.*"},
		"refunds": {"shop.refunds.eu", "shop.refunds.us"},
		"other":   {"elsewhere.>"},
	} {
		if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.MemoryStorage}); err != nil {
			t.Fatal(err)
		}
	}
	for subject, want := range map[string][]string{
		"shop.orders.eu":  {"orders"},
		"*.orders.eu":     {"orders", "other"}, // elsewhere.orders.eu is both
		"shop.refunds.*":  {"refunds"},
		"shop.>":          {"orders", "refunds"},
		"nowhere.at.all":  nil,
		"elsewhere.a.b.c": {"other"},
	} {
		got, err := b.a.StreamsTaking(ctx, subject)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("streams taking %s: %v, want %v", subject, got, want)
		}
	}
	if _, err := b.a.StreamsTaking(ctx, ""); err == nil {
		t.Error("an empty subject was taken")
	}
}

// TestCensusLeavesOutTheStreamsItIsToSkip: a census told to skip streams
// lists none of their consumers and still counts them, so the account's
// totals confirm it (no full stream list), both as the first, full census
// and as a counted one; the other streams' consumers are listed as always.
func TestCensusLeavesOutTheStreamsItIsToSkip(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	makeStreams(t, ctx, b.js, "kept", "other")
	for _, c := range []string{"k1", "k2", "k3"} {
		durableOn(t, ctx, b.js, "kept", c)
	}
	durableOn(t, ctx, b.js, "other", "o1")
	check := func(what string) {
		t.Helper()
		names, ps, err := b.a.Census(ctx, keeper.CensusQuery{Every: true, Skip: []string{"kept"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(names, "kept") || !slices.Contains(names, "other") {
			t.Errorf("%s: the census names %v, want kept and other", what, names)
		}
		if got := consumerKeys(ps); !slices.Equal(got, []string{"other/o1"}) {
			t.Errorf("%s: the census lists %v, want only other/o1", what, got)
		}
	}
	check("the first census")
	lists := countStreamLists(t, b.nc)
	durableOn(t, ctx, b.js, "kept", "k4") // heard of, counted, not listed
	check("a counted census")
	lists.none(t, "a census that skips a stream")
	sameCensus(t, ctx, b.a, "a census that skips nothing, after")
}
