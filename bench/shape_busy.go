package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// The busy bus shape (issue 39): kept data busy/ledger, a KV bucket of
// busyKeys keys, with the bus around it quiet and then busy with other
// modules' streams (other<i>_data, memory storage), each with durable
// consumers (other<i>_reader, other<i>_reader1, …). On each bus the keeper's
// snapshot-kept and the dry run of its restore-kept are timed busyRounds
// times, one after the other; before the last snapshot a consumer of
// another module's stream whose metadata names busy is made, and the point
// must record it. The other modules' streams of one bus are deleted before
// the next is made.
const (
	busyModule = "busy"
	busyLocal  = "ledger"
	busyKeys   = 10
	busyRounds = 15
	busyMakers = 32 // streams made at once
)

// BusyBus is one bus of the busy bus shape: other modules' streams, and
// durable consumers on each.
type BusyBus struct{ Streams, Consumers int }

// DefaultBusyBuses are the buses of issue 39's targets: 5,000 streams with
// a consumer each, 500 with 10 each, and 50,000 consumers (for the keeper's
// memory).
func DefaultBusyBuses() []BusyBus { return []BusyBus{{5_000, 1}, {500, 10}, {1_000, 50}} }

// BusyTier is the figures of one bus of the busy bus shape.
type BusyTier struct {
	Streams, Consumers int      // other modules' streams, and consumers on each
	Snapshot           []Sample // snapshot-kept of busy/ledger
	DryRun             []Sample // restore-kept of its point, dry run
	RSS, PeakRSS       int64    // of the keeper after the tier
	Declared           bool     // the consumer declared busy's just before the last snapshot is in its point
	Made               time.Duration
}

// shapeBusy measures the quiet bus, then every bus of the run's BusyBuses.
func (r *run) shapeBusy(ctx context.Context, sr *ShapeResult) error {
	js, err := r.shapeJS()
	if err != nil {
		return err
	}
	sr.Data = fmt.Sprintf("kept data `%s/%s`, a KV bucket of %d keys of %d random bytes, on a quiet bus and then among other modules' streams (memory storage) with durable consumers on each; %d rounds on each bus",
		busyModule, busyLocal, busyKeys, kvValueSize, busyRounds)
	if err := r.fillKV(ctx, js, busyModule+"_"+busyLocal, busyKeys, kvValueSize, randomPayload()); err != nil {
		return err
	}
	k := kept{module: busyModule, local: busyLocal, wait: 5 * time.Minute}
	made := 0
	for i, bus := range append([]BusyBus{{}}, r.cfg.BusyBuses...) {
		tier := BusyTier{Streams: bus.Streams, Consumers: bus.Consumers}
		began := time.Now()
		if err := busyOthers(ctx, js, made, func(ctx context.Context, js jetstream.JetStream, i int) error {
			return js.DeleteStream(ctx, fmt.Sprintf("other%d_data", i))
		}); err != nil {
			return err
		}
		if err := busyOthers(ctx, js, bus.Streams, func(ctx context.Context, js jetstream.JetStream, i int) error {
			return BusyOther(ctx, js, i, bus.Consumers)
		}); err != nil {
			return err
		}
		made, tier.Made = bus.Streams, time.Since(began)
		r.cfg.Log.Info("busy bus", "streams", bus.Streams, "consumers each", bus.Consumers, "made in", tier.Made)
		err := r.busyTier(ctx, js, k, i, &tier)
		sr.Busy = append(sr.Busy, tier)
		if err != nil {
			return err
		}
	}
	return nil
}

// busyTier times the verbs on one bus.
func (r *run) busyTier(ctx context.Context, js jetstream.JetStream, k kept, n int, tier *BusyTier) error {
	if _, _, err := r.keeperVerb(ctx, "busy-warm", k, r.file().client.SnapshotKept); err != nil { // the first census of a bus may be a full one
		return fmt.Errorf("snapshot-kept of %s/%s, first on the bus: %w", k.module, k.local, err)
	}
	declared := fmt.Sprintf("declared%d", n)
	for i := range busyRounds {
		if i == busyRounds-1 && tier.Streams > 0 {
			if _, err := js.CreateConsumer(ctx, "other0_data", jetstream.ConsumerConfig{Durable: declared, AckPolicy: jetstream.AckExplicitPolicy,
				Metadata: map[string]string{keeper.MetaModule: busyModule}}); err != nil {
				return fmt.Errorf("make the consumer declared %s's: %w", busyModule, err)
			}
		}
		s, rep, err := r.keeperVerb(ctx, "busy-snapshot", k, r.file().client.SnapshotKept)
		if err != nil {
			return fmt.Errorf("snapshot-kept of %s/%s, round %d: %w", k.module, k.local, i+1, err)
		}
		tier.Snapshot = append(tier.Snapshot, s)
		if i == busyRounds-1 && tier.Streams > 0 && rep.Point != nil {
			tier.Declared = slices.ContainsFunc(rep.Point.Positions, func(p keeper.Position) bool { return p.Consumer == declared })
		}
		s, _, err = r.keeperVerb(ctx, "busy-dry-run", k, func(ctx context.Context, q keeper.Request) (*keeper.Reply, error) {
			q.DryRun = true
			return r.file().client.RestoreKept(ctx, q)
		})
		if err != nil {
			return fmt.Errorf("restore-kept of %s/%s (dry run), round %d: %w", k.module, k.local, i+1, err)
		}
		tier.DryRun = append(tier.DryRun, s)
	}
	tier.RSS, _ = statusBytes(r.file().proc.pid(), "VmRSS")
	for _, x := range slices.Concat(tier.Snapshot, tier.DryRun) {
		tier.PeakRSS = max(tier.PeakRSS, x.PeakRSS)
	}
	return nil
}

// busyOthers runs f on other modules' streams 0 to n-1, busyMakers at
// once.
func busyOthers(ctx context.Context, js jetstream.JetStream, n int, f func(context.Context, jetstream.JetStream, int) error) error {
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range busyMakers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, js, i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// BusyOther makes other module i's stream, other<i>_data (memory storage),
// and its durable consumers other<i>_reader, other<i>_reader1, …: what the
// busy bus shape puts beside the kept data, and the e2e busy-bus tests too.
func BusyOther(ctx context.Context, js jetstream.JetStream, i, consumers int) error {
	name := fmt.Sprintf("other%d", i)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name + "_data", Subjects: []string{name + ".>"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		return fmt.Errorf("make stream %s_data: %w", name, err)
	}
	for c := range consumers {
		durable := name + "_reader"
		if c > 0 {
			durable = fmt.Sprintf("%s%d", durable, c)
		}
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			return fmt.Errorf("make consumer %s on %s_data: %w", durable, name, err)
		}
	}
	return nil
}

// busyMarkdown writes the table of the busy bus shape.
func (res *Result) busyMarkdown(b *strings.Builder) {
	var tiers []BusyTier
	for _, s := range res.Shapes {
		tiers = append(tiers, s.Busy...)
	}
	if len(tiers) == 0 {
		return
	}
	quiet := func(f func(BusyTier) []Sample) float64 { return summarize(pick(f(tiers[0]), wall)).med }
	ratio := func(ss []Sample, q float64) string {
		if len(ss) == 0 || q == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", summarize(pick(ss, wall)).med/q)
	}
	snaps := func(t BusyTier) []Sample { return t.Snapshot }
	dries := func(t BusyTier) []Sample { return t.DryRun }
	b.WriteString("#### Busy bus: a 10-key KV among other modules' streams (median, with min–max)\n\n")
	b.WriteString("| other streams × consumers each | made in | `snapshot-kept` | ÷ quiet bus | `restore-kept` dry run | ÷ quiet bus | keeper RSS (peak) | a consumer declared by metadata just before is in the point |\n|---|---|---|---|---|---|---|---|\n")
	for _, t := range tiers {
		bus, declared := "none (quiet bus)", "—"
		if t.Streams > 0 {
			bus, declared = fmt.Sprintf("%d × %d = %d consumers", t.Streams, t.Consumers, t.Streams*t.Consumers), yes(t.Declared)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s (%s) | %s |\n", bus, t.Made.Round(time.Second), times(t.Snapshot), ratio(t.Snapshot, quiet(snaps)),
			times(t.DryRun), ratio(t.DryRun, quiet(dries)), mib(float64(t.RSS)), mib(float64(t.PeakRSS)), declared)
	}
	b.WriteString("\n")
}
