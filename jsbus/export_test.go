package jsbus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// WithTimeout is withTimeout, for the package's external tests: they
// shorten the wait for a server that does not answer.
var WithTimeout = withTimeout

// LoseAdvisories makes a's census book forget the consumers of streams,
// as if their advisories had been lost while the connection stayed up and
// none was counted dropped. The book is first let hear of a consumer on
// each of streams (see forgetHeard).
func LoseAdvisories(a *Adapter, streams ...string) error {
	return forgetHeard(a, fmt.Sprintf("the consumer advisories of streams %v", streams), func(w *censusWatch) bool {
		for _, s := range streams {
			if len(w.book.streams[s]) == 0 {
				return false
			}
		}
		for _, s := range streams {
			w.book.setStream(s, map[string]consumerOwner{})
		}
		return true
	})
}

// LoseStreamAdvisory makes a's census book forget the stream, as if the
// advisory of its creation had been lost while the connection stayed up
// and none was counted dropped. The book is first let hear it (see
// forgetHeard).
func LoseStreamAdvisory(a *Adapter, name string) error {
	return forgetHeard(a, "the advisory of stream "+name, func(w *censusWatch) bool {
		if _, ok := w.book.streams[name]; !ok {
			return false
		}
		w.book.dropStream(name)
		return true
	})
}

// forgetHeard runs forget, with the watch's lock held, after each catch-up
// of a's census watch until it reports that it found what it forgets, for
// at most 5 s. An advisory comes from the server's own queue and may follow
// the reply that made its stream or consumer: forgotten before it was
// heard, it would come after and name it again, and nothing would have
// been lost.
func forgetHeard(a *Adapter, what string, forget func(w *censusWatch) bool) error {
	for try := 0; ; try++ {
		if err := a.catchUp(context.Background()); err != nil {
			return err
		}
		a.census.mu.Lock()
		done := forget(a.census)
		a.census.mu.Unlock()
		if done {
			return nil
		}
		if try == 500 {
			return fmt.Errorf("%s was not heard in 5 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SetCensusRefresh sets the age past which a's census book is made again
// in the background (censusRefresh).
func SetCensusRefresh(a *Adapter, d time.Duration) {
	a.census.mu.Lock()
	a.census.refresh = d
	a.census.mu.Unlock()
}

// CensusBook is what a's census book holds: its streams and consumers
// ("stream/consumer"), and the owner each consumer's metadata names
// ("module/local").
func CensusBook(a *Adapter) (streams int, owners map[string]string) {
	a.census.mu.Lock()
	defer a.census.mu.Unlock()
	owners = map[string]string{}
	for s, cs := range a.census.book.streams {
		for c, o := range cs {
			owners[s+"/"+c] = o.module + "/" + o.local
		}
	}
	return len(a.census.book.streams), owners
}

// WaitDropped waits (at most 5 s) until a's advisory subscriptions count
// a dropped advisory: the server sends an advisory from its own queue
// after the reply that caused it, so a drop is counted some time after.
func WaitDropped(a *Adapter) error {
	for try := 0; a.census.droppedNow() == 0; try++ {
		if try == 500 {
			return fmt.Errorf("no advisory was counted dropped in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// SetAdvisoryLimit bounds a's advisory subscriptions to n pending
// advisories, so that tests can make them drop some.
func SetAdvisoryLimit(a *Adapter, n int) error {
	for _, s := range a.census.subs {
		if err := s.SetPendingLimits(n, -1); err != nil {
			return err
		}
	}
	return nil
}

// AwaitReplicated is awaitReplicated, for the cluster test of its verdicts.
func AwaitReplicated(ctx context.Context, a *Adapter, stream string, replicas int, lastSeq uint64) error {
	return a.awaitReplicated(ctx, stream, replicas, restoreState{LastSeq: lastSeq})
}

// ZeroPendingCounts lists the stream's consumers as their leaders answer,
// counts zeroed as a lagging leader counts them (the fault), and gives the
// names wrongZeroPending finds counting a wrong 0, the names a restore's
// wait asks to step down when it sees that list twice, and whether that
// second look ends the wait. A look the cluster does not answer (between
// leaders, under load) is taken again, up to 10 times, as the wait does.
func ZeroPendingCounts(ctx context.Context, a *Adapter, stream string) (wrong, asked []string, settled bool, err error) {
	cs, missing, err := a.consumers(ctx, stream)
	if err != nil || len(missing) > 0 {
		return nil, nil, false, fmt.Errorf("consumers of %s: %v, missing %v", stream, err, missing)
	}
	var info replicatedInfo
	if err := a.requestOnce(ctx, "$JS.API.STREAM.INFO."+stream, nil, &info); err != nil {
		return nil, nil, false, err
	}
	for i := range cs {
		cs[i].NumPending = 0
	}
	var found []wrongCount
	if err := again(func() (err error) {
		found, err = a.wrongZeroPending(ctx, stream, info.State.LastSeq, cs)
		return err
	}); err != nil {
		return nil, nil, false, err
	}
	for _, w := range found {
		wrong = append(wrong, w.name)
	}
	pc := &pendingCheck{stream: stream, lastSeq: info.State.LastSeq}
	var first bool
	if err := again(func() (err error) { first, err = pc.look(ctx, a, cs); return err }); err != nil {
		return nil, nil, false, err
	}
	if first || len(pc.asked) != 0 {
		var seen []string
		for _, c := range cs {
			seen = append(seen, fmt.Sprintf("%s delivered %d", c.Name, c.Delivered.Stream))
		}
		return nil, nil, false, fmt.Errorf("the first look at a wrong count settled or asked %v to step down (last sequence %d, consumers %v, found %v)",
			pc.asked, info.State.LastSeq, seen, wrong)
	}
	if err := again(func() (err error) { settled, err = pc.look(ctx, a, cs); return err }); err != nil {
		return nil, nil, false, err
	}
	return wrong, pc.asked, settled, nil
}

// again calls f until it returns no error, 10 times at most, 200 ms apart,
// and gives its last error.
func again(f func() error) error {
	var err error
	for range 10 {
		if err = f(); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("10 looks failed, the last: %w", err)
}

// PendingLooksOnAFailingBus gives what the restore's wait makes of four
// looks at the stream's consumers' counts when the bus answers none (the
// consumers counted 0 pending, the requests made on a context ended).
func PendingLooksOnAFailingBus(ctx context.Context, a *Adapter, stream string) ([]bool, error) {
	cs, _, err := a.consumers(ctx, stream)
	if err != nil {
		return nil, err
	}
	for i := range cs {
		cs[i].NumPending = 0
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	pc := &pendingCheck{stream: stream, lastSeq: ^uint64(0)}
	var out []bool
	for range 4 {
		out = append(out, pc.settled(ended, a, cs))
	}
	return out, nil
}

// ListDownstreams is Downstreams as it answers without the census book:
// from the server's stream list.
func ListDownstreams(ctx context.Context, a *Adapter, streams ...string) ([]keeper.Downstream, error) {
	want := map[string]bool{}
	for _, s := range streams {
		want[s] = true
	}
	return a.listDownstreams(ctx, streams, want)
}
