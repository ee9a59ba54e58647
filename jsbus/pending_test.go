package jsbus_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/jsbus"
)

// TestWrongZeroPendingIsFoundAndStepsDown: of a replicated stream's
// consumers counted 0 pending (as a CI run saw two restored R3 consumers
// count), only those with a message after
// their delivered sequence on their filters count it wrongly; a restore's
// wait asks their leaders to step down, and their new leaders count right.
func TestWrongZeroPendingIsFoundAndStepsDown(t *testing.T) {
	_, ctx, js, a := clusterBus(t)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		subj := "orders.a"
		if i%3 == 0 {
			subj = "orders.b"
		}
		if _, err := js.Publish(ctx, subj, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	// b-done has read every orders.b (the last is sequence 28): it counts
	// 0 rightly though messages follow on other subjects. all-done has
	// read everything. fresh and half have messages waiting.
	consume := func(name, filter string, read int) {
		t.Helper()
		c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, FilterSubject: filter,
			AckPolicy: jetstream.AckExplicitPolicy, Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		if read == 0 {
			return
		}
		// A new R3 consumer's pull may end early, unanswered, while its
		// first leader takes the lead: it is pulled again, 10 times at most.
		n := 0
		var last error
		for try := 0; n < read && try < 10; try++ {
			msgs, err := c.Fetch(read-n, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range msgs.Messages() {
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
				n++
			}
			last = msgs.Error()
		}
		if n != read {
			t.Fatalf("%s read %d, want %d (the last pull's error: %v)", name, n, read, last)
		}
	}
	consume("fresh", "", 0)
	consume("half", "orders.a", 7)
	consume("b-done", "orders.b", 10)
	consume("all-done", "", 30)
	leaders := map[string]string{}
	for _, name := range []string{"fresh", "half"} {
		ci, err := st.Consumer(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		leaders[name] = ci.CachedInfo().Cluster.Leader
	}
	wrong, asked, settled, err := jsbus.ZeroPendingCounts(ctx, a, "orders")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(wrong)
	slices.Sort(asked)
	if fmt.Sprint(wrong) != "[fresh half]" || fmt.Sprint(asked) != "[fresh half]" || settled {
		t.Fatalf("counting 0 wrongly: %v, asked to step down: %v, settled %v; want [fresh half] both, not settled", wrong, asked, settled)
	}
	want := map[string]uint64{"fresh": 30, "half": 13}
	for name, n := range want {
		for {
			// A consumer between leaders does not answer.
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ci, err := st.Consumer(actx, name)
			cancel()
			if err == nil && ci.CachedInfo().Cluster.Leader != leaders[name] && ci.CachedInfo().Cluster.Leader != "" {
				if got := ci.CachedInfo().NumPending; got != n {
					t.Fatalf("%s's new leader counts %d pending, want %d", name, got, n)
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s's leader %s did not step down: %v", name, leaders[name], err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// A consumer of one replica has no other to lead it: it is not asked
	// to step down, and the wait ends rather than looking until its
	// timeout.
	solo, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "solo", Subjects: []string{"solo.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "solo.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := solo.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "one", AckPolicy: jetstream.AckExplicitPolicy, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	wrong, asked, settled, err = jsbus.ZeroPendingCounts(ctx, a, "solo")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(wrong) != "[one]" || len(asked) != 0 || !settled {
		t.Fatalf("an R1 consumer counting 0 wrongly: %v, asked to step down: %v, settled %v; want [one], none, settled", wrong, asked, settled)
	}
}

// TestPendingLooksOnAFailingBus: a look at the counts that the bus does not
// answer (a cluster between leaders answers 10008 at once) does not end a
// restore's wait; the third such look does, so a bus that stays away costs
// the wait three pauses, not its timeout.
func TestPendingLooksOnAFailingBus(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	st, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.Publish(ctx, "orders.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "fresh", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	got, err := jsbus.PendingLooksOnAFailingBus(ctx, b.a, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[false false true true]" {
		t.Fatalf("four failed looks settled the wait as %v, want [false false true true]", got)
	}
}
