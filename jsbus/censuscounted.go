package jsbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// A census that the account's totals do not confirm is tried censusTries
// times, a random pause of up to censusPause apart (an advisory on its way,
// or consumers of other clients coming and going), before a full census is
// made and it is tried again; after maxFullCensuses full censuses it is
// taken as it stands.
const (
	censusTries     = 5
	censusPause     = 20 * time.Millisecond
	maxFullCensuses = 2
)

// censusWorkers is how many streams or consumers a census reads at once.
const censusWorkers = 8

// A full census is made again in the background, the censuses not waiting
// for it, once the last is censusRefresh old: it takes what no advisory
// says (a consumer's metadata changed by an update on a single server). It
// has fullCensusBudget to list the bus.
const (
	censusRefresh    = 10 * time.Minute
	fullCensusBudget = 10 * time.Minute
)

// Census names every stream on the bus and lists the durable consumers of
// each stream that holds one q wants, but those of q.Skip, with their
// configurations and ack floors as the server holds them now. It asks the
// server nothing that grows with the bus: the streams and who owns which
// consumer come from the census book (censusWatch), kept from one full
// census by the server's advisories; what an advisory named since the last
// census is read afresh first (one read for each stream or consumer named,
// however many advisories named it), and only the streams that hold a
// consumer q wants are listed. That census counts when the account's totals
// of streams and consumers, read before and after the lists (after, only
// when there are any), both equal the book's (every consumer, durable or
// not). Otherwise it is tried again, and
// after censusTries tries the book is made again by a full census: every
// stream listed, and the consumers of each that has one. So is it whenever
// advisories may have been missed (at the first census, after a reconnect,
// after advisories or marks were dropped). A full census runs in the
// background, one at a time: the censuses that need one wait for the same.
// A keeper that cannot hear the advisories, or on a bus of more than
// maxCensusConsumers consumers, lists every stream at every census.
//
// What it guarantees: on one server, a consumer made before the call
// began is heard before the book is read, so it is listed if q wants it. A
// stream's advisory comes from its own queue and may follow the reply that
// made it; the totals then count one stream more than the book, and the
// census is made again. On a cluster a consumer's or a stream's advisory may
// come after the census began (its leader sends it after its reply); the
// totals catch that too. The cases the totals cannot catch are an advisory
// lost while the connection stayed up and none was counted dropped, when
// another change leaves the counts as they were: the count comes out right
// and the book wrong, until the next full census.
func (a *Adapter) Census(ctx context.Context, q keeper.CensusQuery) ([]string, []keeper.Position, error) {
	w, fulls := a.census, 0
	for try := 1; ; try++ {
		if w.listsAll() {
			return a.everyStream(ctx, q)
		}
		if !w.trusted(a.connMark()) && fulls < maxFullCensuses {
			fulls++
			if err := a.awaitFull(ctx); err != nil {
				return nil, nil, err
			}
			continue
		}
		if w.stale() {
			a.startFull()
		}
		names, ps, ok, err := a.countedCensus(ctx, q)
		if err != nil && fulls < maxFullCensuses && ctx.Err() == nil {
			// A read that failed leaves the book untrusted: a full census
			// is made instead, as when advisories were missed.
			a.log.Debug("a census failed; the book is made again by a full census", "err", err)
			w.distrust()
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return names, ps, nil
		}
		if fulls >= maxFullCensuses {
			a.log.Warn("the account's totals did not confirm the census after full ones; it is taken as it stands", "tries", try)
			return names, ps, nil
		}
		if try%censusTries == 0 {
			w.distrust()
			continue
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("jsbus: census stopped: %w", ctx.Err())
		case <-time.After(rand.N(censusPause) + time.Millisecond):
		}
	}
}

// countedCensus is one try of Census once the book is trusted; ok is false
// when the account's totals do not confirm it.
func (a *Adapter) countedCensus(ctx context.Context, q keeper.CensusQuery) ([]string, []keeper.Position, bool, error) {
	w := a.census
	mark, dropped := a.connMark(), w.droppedNow()
	if err := a.catchUp(ctx); err != nil {
		return nil, nil, false, err
	}
	// The totals are read as close around the consumer lists as can be:
	// a consumer made or removed anywhere between the two reads (an
	// ordered consumer of a KV read, say) makes the census try again.
	before, err := a.accountTotals(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	w.mu.Lock()
	gen, names, wanted := w.gen, w.book.names(), w.book.wanted(q)
	book := accountTotals{Streams: len(w.book.streams), Consumers: w.book.n}
	w.mu.Unlock()
	// The lists are made even when the book is not confirmed: they are
	// the module's streams only, and the last try is taken as it stands.
	ps, _, err := a.listConsumers(ctx, wanted)
	if err != nil {
		return nil, nil, false, err
	}
	// With nothing listed there is nothing between the two reads for the
	// second to confirm.
	after := before
	if len(wanted) > 0 {
		if after, err = a.accountTotals(ctx); err != nil {
			return nil, nil, false, err
		}
	}
	w.mu.Lock()
	if w.gen == gen {
		w.book.refresh(ps)
	}
	w.mu.Unlock()
	ok := before == book && before == after && !a.connLost(mark) && w.droppedNow() == dropped
	if !ok {
		a.log.Debug("the account's totals do not confirm the census", "book", book, "before", before, "after", after)
	}
	return names, ps, ok, nil
}

// catchUp takes the advisories sent before now and reads what they name,
// one catch-up at a time. A read that fails leaves the book untrusted.
func (a *Adapter) catchUp(ctx context.Context) error {
	w := a.census
	w.drain.Lock()
	defer w.drain.Unlock()
	if err := w.take(ctx); err != nil {
		return err
	}
	gen := w.generation()
	streams, consumers := w.takeMarks()
	err := forEach(ctx, streams, func(ctx context.Context, s string) error { return a.readStream(ctx, gen, s) })
	if err == nil {
		err = forEach(ctx, consumers, func(ctx context.Context, c [2]string) error { return a.readConsumer(ctx, gen, c) })
	}
	if err != nil {
		w.distrust()
		return fmt.Errorf("jsbus: reading what the advisories named: %w", err)
	}
	return nil
}

// streamState is the part of a stream's info readStream reads.
type streamState struct {
	Config upstreamConfig `json:"config"`
	State  struct {
		Consumers int `json:"consumer_count"`
	} `json:"state"`
}

// readStream reads one stream an advisory named into the book: gone, it
// is dropped with its consumers; there, its consumers are listed, if any,
// and its upstreams kept.
func (a *Adapter) readStream(ctx context.Context, gen uint64, stream string) error {
	var info streamState
	err := a.request(ctx, "$JS.API.STREAM.INFO."+stream, nil, &info)
	gone := isCode(err, codeStreamNotFound)
	if err != nil && !gone {
		return fmt.Errorf("look up stream %s: %w", stream, err)
	}
	cs := map[string]consumerOwner{}
	if !gone && info.State.Consumers != 0 {
		if cs, gone, err = a.streamOwners(ctx, stream); err != nil {
			return err
		}
	}
	a.census.edit(gen, [2]string{stream, ""}, func(b *censusBook) {
		if gone {
			b.dropStream(stream)
		} else {
			b.setStream(stream, cs)
			b.setUpstreams(stream, a.upstreamsOf(info.Config), true)
		}
	})
	return nil
}

// readConsumer reads one consumer an advisory named ({stream, consumer})
// into the book: gone, it is dropped; there, it is put with its owner.
func (a *Adapter) readConsumer(ctx context.Context, gen uint64, c [2]string) error {
	info, err := a.consumerInfo(ctx, c[0], c[1])
	gone := isCode(err, codeStreamNotFound) || isCode(err, codeConsumerNotFound)
	if err != nil && !gone {
		return fmt.Errorf("look up consumer %s on %s: %w", c[1], c[0], err)
	}
	a.census.edit(gen, c, func(b *censusBook) {
		if gone {
			b.drop(c[0], c[1])
		} else {
			b.put(c[0], c[1], ownerOf(info.Config))
		}
	})
	return nil
}

// streamOwners lists the consumers of stream, with their owners; gone says
// the stream is not there. One that did not answer the list (on a cluster)
// is there all the same, its owner unknown.
func (a *Adapter) streamOwners(ctx context.Context, stream string) (map[string]consumerOwner, bool, error) {
	cs, missing, err := a.consumers(ctx, stream)
	if isCode(err, codeStreamNotFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, busErr(fmt.Errorf("jsbus: list consumers of stream %s: %w", stream, err))
	}
	out := make(map[string]consumerOwner, len(cs)+len(missing))
	for _, m := range missing {
		out[m] = consumerOwner{}
	}
	for _, c := range cs {
		out[c.Name] = ownerOf(c.Config)
	}
	return out, false, nil
}

// forEach runs f on each of items, censusWorkers at once, and gives the
// first error; after one, the items not yet begun are not.
func forEach[T any](ctx context.Context, items []T, f func(context.Context, T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan T)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(censusWorkers, len(items)) {
		wg.Go(func() {
			for it := range next {
				if err := f(ctx, it); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case next <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil && len(items) > 0 {
		first = ctx.Err()
	}
	return first
}

// everyStream is a census that lists every stream, and the consumers of
// each that has one (but those of q.Skip), keeping the lists of the streams
// that hold one q wants: the census of a keeper that cannot hear the
// advisories, or of a bus too large for the book.
func (a *Adapter) everyStream(ctx context.Context, q keeper.CensusQuery) ([]string, []keeper.Position, error) {
	streams, err := a.Streams(ctx)
	if err != nil {
		return nil, nil, err
	}
	names, total, out := make([]string, 0, len(streams)), 0, []keeper.Position{}
	for _, s := range streams {
		names = append(names, s.Name)
		total += max(s.Consumers, 0)
		if s.Consumers == 0 || slices.Contains(q.Skip, s.Name) {
			continue
		}
		ps, _, err := a.listConsumers(ctx, []string{s.Name})
		if err != nil {
			return nil, nil, err
		}
		if slices.ContainsFunc(ps, func(p keeper.Position) bool { return wants(q, p.Stream, p.Consumer, ownerOf(p.Config)) }) {
			out = append(out, ps...)
		}
	}
	a.census.fits(total)
	slices.Sort(names)
	slices.SortFunc(out, func(x, y keeper.Position) int {
		return cmp.Or(strings.Compare(x.Stream, y.Stream), strings.Compare(x.Consumer, y.Consumer))
	})
	return names, out, nil
}

// wants reports whether q wants the consumer: by its name or owner, or
// named.
func wants(q keeper.CensusQuery, stream, consumer string, o consumerOwner) bool {
	return q.Wants(consumer, o.module) || slices.Contains(q.Named, keeper.PlanConsumer{Stream: stream, Consumer: consumer})
}

// errOverBound stops a full census that found more consumers than the
// book holds.
var errOverBound = errors.New("more consumers than the census book holds")

// accountTotals are the account's numbers of streams and consumers, as
// the server (on a cluster, the meta leader) counts them.
type accountTotals struct {
	Streams   int `json:"streams"`
	Consumers int `json:"consumers"`
}

func (a *Adapter) accountTotals(ctx context.Context) (accountTotals, error) {
	var t accountTotals
	if err := a.request(ctx, "$JS.API.INFO", nil, &t); err != nil {
		return t, fmt.Errorf("jsbus: read the account's totals: %w", err)
	}
	return t, nil
}
