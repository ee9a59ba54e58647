package keeper_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// A journal of a module with this many consumers on a stream the point does
// not carry passed the index's max value (1 MiB) when the journal carried
// their positions: the restore was refused before it removed anything
// (1,645 consumers of the shape below were the first that failed).
const (
	feedStream    = "FEED"
	feedConsumers = 1700
	indexMaxValue = 1 << 20
	// maxJournalHead bounds the head of any journal here, whatever the
	// number of consumers.
	maxJournalHead = 16 << 10
)

// journalWatch records, at every step of a restore, the size of its
// journal's head, and at "journal-written" the size the journal would
// have had in the shape keepers wrote before bodies had parts. crashAt, when
// set, stops the restore at that step as a killed keeper would.
type journalWatch struct {
	e                *env
	maxHead, written int // the largest head seen, and the old shape's size once written
	parts            int
	crashAt          string
	err              error
}

func (w *journalWatch) hook(step string) {
	if step != "journal-written" && step != "positions-set" && !strings.HasPrefix(step, "removed:") && !strings.HasPrefix(step, "restored:") {
		return
	}
	head, whole, parts, err := w.e.k.JournalSizes(w.e.ctx, module, local)
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("at %s: %w", step, err)
	}
	w.maxHead = max(w.maxHead, head)
	if step == "journal-written" {
		w.written, w.parts = whole, parts
	}
	if step == w.crashAt {
		panic(crash{step})
	}
}

// check fails t unless the restore's journal heads stayed small while the
// journal in the older shape would have passed the index's max value.
func (w *journalWatch) check(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: journal heads of up to %d bytes; in the older shape %d bytes, here in %d parts", what, w.maxHead, w.written, w.parts)
	if w.err != nil {
		t.Errorf("%s: reading the journal: %v", what, w.err)
	}
	if w.maxHead == 0 || w.maxHead > maxJournalHead {
		t.Errorf("%s: the journal's head took up to %d bytes, want 1 to %d", what, w.maxHead, maxJournalHead)
	}
	if w.written <= indexMaxValue || w.parts < 2 {
		t.Errorf("%s: the journal in the older shape is %d bytes, in %d part(s); the test wants it over the index's %d", what, w.written, w.parts, indexMaxValue)
	}
	*w = journalWatch{e: w.e}
}

// TestJournalOfManyConsumers restores a kept data whose module has 1,700
// consumers on a stream the point does not carry, on every path: over the
// live data, putting the aside back, aside-only, into absent data, and
// recovering a restore stopped after its journal was written, of live
// data and of absent data. Each journal's head stays small although the
// journal would have passed the index's max value; every consumer is set
// back where it was recorded.
func TestJournalOfManyConsumers(t *testing.T) {
	w := &journalWatch{}
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = w.hook
		// One stream at a time: nats-server 2.15.3 can die of a concurrent
		// map read and write (jsAccount.tieredReservation in
		// RestoreStreamV2) when restores run at once on one server.
		c.StreamParallel = 1
	})
	w.e = e
	names := feedOf(t, e, feedConsumers)
	point := req(3, "many")
	snap := e.snapshot(3, "many")
	if len(snap.Positions) < feedConsumers {
		t.Fatalf("snapshot-kept read %d positions, want at least %d", len(snap.Positions), feedConsumers)
	}

	t.Run("live", func(t *testing.T) {
		resetAll(t, e, names, 11)
		e.change()
		rep := w.restore(t, point, "restore over the live data", names, 0)

		// The aside holds the consumers at 10: putting it back sets them there.
		resetAll(t, e, names, 16)
		back := point
		back.From = "aside/" + rep.Aside.ID
		w.restore(t, back, "put-back", names, 10)
	})

	t.Run("aside-only", func(t *testing.T) {
		asideOnly(t, e, point)
		if w.maxHead == 0 || w.maxHead > maxJournalHead {
			t.Errorf("aside-only: the journal's head took up to %d bytes, want 1 to %d", w.maxHead, maxJournalHead)
		}
		*w = journalWatch{e: e}
		wantFloors(t, e, names, 10) // not the kept data's: left as they are
		noJournal(t, e)
	})

	t.Run("into-absent", func(t *testing.T) {
		w.restore(t, point, "restore into absent data", names, 0)
	})

	t.Run("recover-live", func(t *testing.T) {
		resetAll(t, e, names, 7)
		e.change()
		w.crashAt = "removed:" + e.names.KVStream
		stopped(t, func() { e.k.RestoreKept(e.ctx, point) })
		w.check(t, "restore stopped after a removal")
		mustContain(t, recoverSerial(t, e), "was completed", fmt.Sprintf("%d consumer position(s) were set back", feedConsumers+1))
		wantFloors(t, e, names, 0)
		noJournal(t, e)
	})

	t.Run("recover-into-absent", func(t *testing.T) {
		asideOnly(t, e, point)
		resetAll(t, e, names, 13)
		*w = journalWatch{e: e, crashAt: "journal-written"}
		stopped(t, func() { e.k.RestoreKept(e.ctx, point) })
		w.check(t, "restore into absent data stopped after its journal")
		mustContain(t, recoverSerial(t, e), "was completed")
		wantFloors(t, e, names, 0)
		noJournal(t, e)
	})
}

// asideOnly sets the live data of r's kept data aside and removes it.
func asideOnly(t *testing.T, e *env, r keeper.Request) {
	t.Helper()
	r.AsideOnly = true
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatalf("aside-only: %v", err)
	}
}

// recoverSerial opens another keeper on e's bus, index and directory, as a
// keeper started again would, that restores one stream at a time (see
// TestJournalOfManyConsumers), and recovers: one interrupted restore must
// be taken up. It returns what recovery said of it.
func recoverSerial(t *testing.T, e *env) string {
	t.Helper()
	k, err := e.keeperOn(e.dir, func(c *keeper.Config) { c.StreamParallel = 1 })
	if err != nil {
		t.Fatal(err)
	}
	rec, err := k.Recover(e.ctx)
	said := rec.Said()
	if err != nil || len(said) != 1 {
		t.Fatalf("recover: %v %+v", err, rec)
	}
	return said[0]
}

// restore runs restore-kept of r, which must succeed with small journal
// heads (check), the named consumers on FEED at ack floor floor after it,
// and no journal left.
func (w *journalWatch) restore(t *testing.T, r keeper.Request, what string, names []string, floor uint64) *keeper.Reply {
	t.Helper()
	rep, err := w.e.k.RestoreKept(w.e.ctx, r)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	w.check(t, what)
	wantFloors(t, w.e, names, floor)
	noJournal(t, w.e)
	return rep
}

// feedOf makes the stream FEED, which the point does not carry, with 20
// messages and n of the module's consumers on it, and returns their names.
func feedOf(t *testing.T, e *env, n int) []string {
	t.Helper()
	st, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: feedStream, Subjects: []string{"feed.>"}, MaxConsumers: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := e.js.Publish(e.ctx, "feed.x", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-feed%05d", module, i)
	}
	inBatches(t, names, func(name string) error {
		_, err := st.CreateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubject: "feed.>", Description: "one of many consumers of the module, each with a configuration of some size"})
		return err
	})
	return names
}

// inBatches runs do for every name, 16 at a time.
func inBatches(t *testing.T, names []string, do func(string) error) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 16)
	for _, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := do(name); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// resetAll moves every named consumer on FEED to deliver seq next: its ack
// floor is then seq-1.
func resetAll(t *testing.T, e *env, names []string, seq int) {
	t.Helper()
	nc := natstest.Connect(t, e.srv)
	inBatches(t, names, func(name string) error { return resetTo(e, nc, name, seq) })
	wantFloors(t, e, names, uint64(seq-1))
}

func resetTo(e *env, nc *nats.Conn, name string, seq int) error {
	m, err := nc.RequestWithContext(e.ctx, "$JS.API.CONSUMER.RESET."+feedStream+"."+name, fmt.Appendf(nil, `{"seq":%d}`, seq))
	if err != nil {
		return err
	}
	var r struct {
		Error any `json:"error"`
	}
	if json.Unmarshal(m.Data, &r) != nil || r.Error != nil {
		return fmt.Errorf("reset: %s", m.Data)
	}
	return nil
}

// wantFloors fails t unless every named consumer on FEED is there, at ack
// floor floor.
func wantFloors(t *testing.T, e *env, names []string, floor uint64) {
	t.Helper()
	st, err := e.js.Stream(e.ctx, feedStream)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	l := st.ListConsumers(e.ctx)
	for ci := range l.Info() {
		got[ci.Name] = ci.AckFloor.Stream
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, n := range names {
		if f, ok := got[n]; !ok || f != floor {
			if bad++; bad <= 3 {
				t.Errorf("consumer %s on %s: there %v, ack floor %d, want %d", n, feedStream, ok, f, floor)
			}
		}
	}
	if bad > 3 {
		t.Errorf("... %d of %d consumers in all are not at ack floor %d", bad, len(names), floor)
	}
}

// noJournal fails t if the index holds a journal's head or any part.
func noJournal(t *testing.T, e *env) {
	t.Helper()
	for _, prefix := range []string{"journal.", keeper.JournalPartPrefix} {
		if keys, err := e.bus.Keys(e.ctx, prefix); err != nil || len(keys) != 0 {
			t.Errorf("index keys under %s left: %d (%v)", prefix, len(keys), err)
		}
	}
}

// stopped runs fn, which must stop at a crash.
func stopped(t *testing.T, fn func()) {
	t.Helper()
	defer func() {
		if _, ok := recover().(crash); !ok {
			t.Fatal("the restore did not stop where it was to")
		}
	}()
	fn()
}
