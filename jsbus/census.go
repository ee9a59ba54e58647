package jsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// A census that the account's totals do not confirm is tried censusTries
// times in all, a random pause of up to censusPause apart (an advisory on
// its way, or consumers of other clients coming and going), before a full
// census is made instead.
const (
	censusTries = 5
	censusPause = 20 * time.Millisecond
)

// Pending limits of the advisory subscriptions, whose advisories wait
// there until the next census takes them: past them (a bus busy making
// consumers while no verb runs) advisories are dropped, and the next census
// is a full one. An advisory is some 300 bytes.
const (
	advisoryPendingMsgs  = 8192
	advisoryPendingBytes = 4 << 20
)

// censusWatch keeps, from the server's advisories, the names of the
// streams on the bus (stream created, deleted or restored) and of those that
// may hold a consumer (a consumer created, a stream restored: its snapshot
// may carry consumers). Both are hints, never the truth: a census lists the
// consumers of these streams afresh and counts the streams and consumers
// against the account's totals (see Census). Its memory is bounded by the
// streams on the bus: a deleted stream's name is dropped, and so is one that
// had no consumer when listed; the advisories wait in the subscriptions'
// queues, within their pending limits, until a census takes them (catchUp).
// The stream advisories come on one subscription, so that a stream deleted
// and made again (as a restore does) is taken in the order it happened.
type censusWatch struct {
	mu    sync.Mutex
	with  map[string]uint64 // stream -> generation of the last word that it may hold a consumer
	names map[string]bool   // the streams on the bus: seeded by a full census, kept by the advisories
	gen   uint64
	// seeded is set once a full census has filled with; reconnects and
	// dropped are the connection's reconnects and the advisories dropped
	// at that census. While either has changed since, advisories may have
	// been missed, and the next census is a full one.
	seeded     bool
	reconnects uint64
	dropped    int
	off        bool // the advisories cannot be heard: every census is full

	nc      *nats.Conn
	log     *slog.Logger
	timeout time.Duration // of the flush
	subs    []*nats.Subscription
	drain   sync.Mutex // one catchUp at a time, so advisories are taken in order
}

// watchCensus subscribes to the advisories of censusWatch. One that cannot
// subscribe (the keeper's user may not, say) makes every census a full one.
func (a *Adapter) watchCensus() *censusWatch {
	w := &censusWatch{with: map[string]uint64{}, names: map[string]bool{}, nc: a.nc, log: a.log, timeout: a.cfg.timeout}
	// The stream advisories are taken first (catchUp takes each
	// subscription's in turn): a consumer heard of is then never forgotten
	// for a deletion of its stream that came before it.
	for _, subject := range []string{"$JS.EVENT.ADVISORY.STREAM.*.*", "$JS.EVENT.ADVISORY.CONSUMER.CREATED.*.*"} {
		sub, err := a.nc.SubscribeSync(subject)
		if err == nil {
			err = sub.SetPendingLimits(advisoryPendingMsgs, advisoryPendingBytes)
		}
		if err != nil {
			a.log.Warn("cannot hear the server's advisories, so every census lists every stream", "subject", subject, "err", err)
			w.off = true
			return w
		}
		w.subs = append(w.subs, sub)
	}
	// A subscription the server refuses is refused after the fact: the
	// flush brings the refusal, if any, before its answer.
	err := a.nc.Flush()
	if last := a.nc.LastError(); err == nil && last != nil && strings.Contains(last.Error(), "$JS.EVENT.ADVISORY") {
		err = last
	}
	if err != nil {
		a.log.Warn("cannot hear the server's advisories, so every census lists every stream", "err", err)
		w.off = true
	}
	return w
}

// catchUp takes every advisory the server sent before now: the flush's
// answer comes after them on the connection, so once it is in, they wait in
// the subscriptions' queues, and are taken in order. On one server an
// advisory of a consumer is sent before the reply to the request that made
// it, so a consumer made before the census began is heard by then. (On a
// cluster another server may send it, later: the account's totals catch
// that one.)
func (w *censusWatch) catchUp(ctx context.Context) error {
	if w.off {
		return nil
	}
	w.drain.Lock()
	defer w.drain.Unlock()
	return w.take(ctx)
}

// take is catchUp with its lock held.
func (w *censusWatch) take(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if err := w.nc.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("jsbus: flush before taking the advisories: %w", err)
	}
	for _, sub := range w.subs {
		n, _, err := sub.Pending()
		if err != nil {
			return fmt.Errorf("jsbus: the advisory subscription on %s is gone: %w", sub.Subject, err)
		}
		for range n {
			m, err := sub.NextMsg(time.Second)
			if errors.Is(err, nats.ErrSlowConsumer) {
				// Once after advisories were dropped (Dropped counts them):
				// the next call gives the next one. Left there, the queue
				// would stay full and every census be a full one.
				m, err = sub.NextMsg(time.Second)
			}
			if err != nil {
				return fmt.Errorf("jsbus: taking an advisory on %s: %w", sub.Subject, err)
			}
			w.heard(m)
		}
	}
	return nil
}

// heard takes one advisory. Its subject is
// $JS.EVENT.ADVISORY.<kind>.<action>.<stream>[.<consumer>]: a consumer
// created or a stream restored may hold a consumer; a stream created or
// restored is on the bus, one deleted is not. Other stream advisories
// (updated, snapshots, leaders) change neither.
func (w *censusWatch) heard(m *nats.Msg) {
	tokens := strings.Split(m.Subject, ".")
	if len(tokens) < 6 {
		return
	}
	stream := tokens[5]
	w.mu.Lock()
	defer w.mu.Unlock()
	switch tokens[3] + "." + tokens[4] {
	case "CONSUMER.CREATED":
		w.gen++
		w.with[stream] = w.gen
	case "STREAM.RESTORE_COMPLETE":
		w.gen++
		w.with[stream] = w.gen
		w.names[stream] = true
	case "STREAM.CREATED":
		w.names[stream] = true
	case "STREAM.DELETED":
		delete(w.names, stream)
		delete(w.with, stream)
	}
}

// streamNames are the streams the watch holds to be on the bus, sorted.
func (w *censusWatch) streamNames() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.names))
}

// droppedNow is how many advisories the subscriptions have dropped.
func (w *censusWatch) droppedNow() int {
	n := 0
	for _, s := range w.subs {
		d, err := s.Dropped()
		if err != nil {
			return -1 // closed: as good as lost
		}
		n += d
	}
	return n
}

// trusted reports whether the watch has heard every advisory since its last
// full census: it is on, seeded, the connection has not reconnected and no
// advisory was dropped.
func (w *censusWatch) trusted(reconnects uint64) bool {
	dropped := w.droppedNow()
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.off && w.seeded && w.reconnects == reconnects && dropped >= 0 && w.dropped == dropped
}

// candidates are the streams of names that may hold a consumer, with the
// generation each was last heard at. One not among names stays a
// candidate for later: its stream's advisory may still be on its way.
func (w *censusWatch) candidates(names []string) map[string]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]uint64{}
	for _, s := range names {
		if g, ok := w.with[s]; ok {
			out[s] = g
		}
	}
	return out
}

// hold keeps every other census from taking advisories until the returned
// func is called, and takes those waiting now, so that the subscriptions'
// queues have room again: a full census holds it from before its list to
// its seed, so that the advisories sent meanwhile are taken after the seed,
// in order. (A full census that left them waiting would find its queues
// still full the next time, its own advisories dropped, and never be
// trusted again.)
func (w *censusWatch) hold(ctx context.Context) func() {
	w.drain.Lock()
	if !w.off {
		if err := w.take(ctx); err != nil {
			w.log.Debug("could not take the advisories waiting before a full census", "err", err)
		}
	}
	return w.drain.Unlock
}

// seed takes the streams a full census named, and those it found with a
// consumer, and marks the watch trusted as of the reconnects and dropped
// counts taken before it. The advisories still waiting are taken after the
// seed, in order; one sent before the full list only says again what it
// shows, so the names come out as the bus holds them.
func (w *censusWatch) seed(names, with []string, reconnects uint64, dropped int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.names)
	for _, s := range names {
		w.names[s] = true
	}
	for s := range w.with {
		if !w.names[s] {
			delete(w.with, s) // gone, its deletion unheard
		}
	}
	for _, s := range with {
		w.gen++
		w.with[s] = w.gen
	}
	w.seeded, w.reconnects, w.dropped = dropped >= 0, reconnects, dropped
}

// forget drops the streams that were listed with no consumer, unless an
// advisory named them again since (their generation moved on), and, after
// a census the totals confirmed, those the watch no longer holds to be on
// the bus (a consumer heard of after its stream's deletion was taken).
func (w *censusWatch) forget(empty map[string]uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s, g := range w.with {
		if eg, listed := empty[s]; (listed && eg == g) || !w.names[s] {
			delete(w.with, s)
		}
	}
}

// Census names every stream on the bus and lists every durable consumer
// on it, as Streams and Consumers would together, without a full stream
// list each time: once the watch has taken every advisory sent before the
// census began (catchUp), the names are the watch's (the last full census's,
// kept by the stream advisories since), and the consumers are listed afresh
// (configurations and ack floors as the server holds them now) on the
// streams the watch says may hold one. So a census asks the server nothing
// that grows with the streams on the bus: no stream list, no name list.
// That census counts only when the account's totals of streams and
// consumers, read before and after it, both equal what it found (every
// consumer, durable or not). Otherwise, after censusTries tries, and
// whenever advisories may have been missed (at the first census, after a
// reconnect, after dropped advisories, or when they cannot be subscribed
// to), it is a full one: every stream listed, and the consumers of each
// that has one.
//
// What it guarantees: on one server, a consumer made before the call
// began is heard by catchUp, so it is listed. A stream's advisory comes
// from its own queue and may follow the reply that made it; the totals then
// count one stream more than the watch names, and the census is made again
// (the advisory is in by then) or in full. On a cluster a consumer's or a
// stream's advisory may come after the census began (its leader sends it
// after its reply); the totals catch that too. The cases the totals cannot
// catch are an advisory late or lost while, during the census, another
// consumer on a stream it lists is made and gone again between the two reads
// of the totals, or while another stream is deleted: the count comes out
// right and the set wrong.
//
// The consumers of the streams named in skip are counted (for the totals)
// but not listed: a snapshot reads those from the streams' own snapshots.
func (a *Adapter) Census(ctx context.Context, skip ...string) ([]string, []keeper.Position, error) {
	for try := 0; try < censusTries && a.census.trusted(a.connMark()); try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return nil, nil, fmt.Errorf("jsbus: census stopped: %w", ctx.Err())
			case <-time.After(rand.N(censusPause) + time.Millisecond):
			}
		}
		names, ps, ok, err := a.countedCensus(ctx, skip)
		if err != nil {
			a.log.Debug("a counted census failed; a full census is made instead", "err", err)
			break
		}
		if ok {
			return names, ps, nil
		}
	}
	return a.fullCensus(ctx, skip)
}

// countedCensus is one try of Census's light way; ok is false when the
// account's totals do not confirm what it found.
func (a *Adapter) countedCensus(ctx context.Context, skip []string) ([]string, []keeper.Position, bool, error) {
	mark, dropped := a.connMark(), a.census.droppedNow()
	if err := a.census.catchUp(ctx); err != nil {
		return nil, nil, false, err
	}
	names := a.census.streamNames()
	// The totals are read as close around the consumer lists as can be:
	// a consumer made or removed anywhere between the two reads (an
	// ordered consumer of a KV read, say) makes the census try again.
	before, err := a.accountTotals(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	cand := a.census.candidates(names)
	ps, counts, err := a.listConsumers(ctx, without(slices.Sorted(maps.Keys(cand)), skip))
	if err != nil {
		return nil, nil, false, err
	}
	if err := a.countSkipped(ctx, names, skip, counts); err != nil {
		return nil, nil, false, err
	}
	after, err := a.accountTotals(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	found := 0
	for _, n := range counts {
		found += n
	}
	empty := map[string]uint64{}
	for s, g := range cand {
		if counts[s] == 0 {
			empty[s] = g
		}
	}
	ok := before == after && after.Streams == len(names) && after.Consumers == found &&
		!a.connLost(mark) && a.census.droppedNow() == dropped
	if ok {
		a.census.forget(empty)
	} else {
		a.log.Debug("the account's totals do not confirm a census", "streams", len(names), "consumers", found,
			"totals before", before, "totals after", after)
	}
	return names, ps, ok, nil
}

// fullCensus lists every stream, and the consumers of each that has one
// (or whose count is not known), and seeds the watch with those.
func (a *Adapter) fullCensus(ctx context.Context, skip []string) ([]string, []keeper.Position, error) {
	defer a.census.hold(ctx)()
	mark, dropped := a.connMark(), a.census.droppedNow()
	a.log.Debug("a full census: every stream is listed", "reconnects", mark, "dropped advisories", dropped)
	streams, err := a.Streams(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, 0, len(streams))
	var with []string
	for _, s := range streams {
		names = append(names, s.Name)
		if s.Consumers != 0 {
			with = append(with, s.Name)
		}
	}
	ps, err := a.Consumers(ctx, without(slices.Clone(with), skip))
	if err != nil {
		return nil, nil, err
	}
	a.census.seed(names, with, mark, dropped)
	return names, ps, nil
}

// without is streams (changed in place) less those of skip.
func without(streams, skip []string) []string {
	return slices.DeleteFunc(streams, func(s string) bool { return slices.Contains(skip, s) })
}

// countSkipped counts the consumers of the streams of skip that names
// holds, from each stream's info, into counts (the list's counts, by
// stream): a census does not list them, but the account's totals count
// them.
func (a *Adapter) countSkipped(ctx context.Context, names, skip []string, counts map[string]int) error {
	for _, s := range skip {
		if _, done := counts[s]; done || !slices.Contains(names, s) {
			continue
		}
		si, err := a.Stream(ctx, s)
		if errors.Is(err, keeper.ErrNoStream) {
			counts[s] = 0
			continue
		}
		if err != nil {
			return err
		}
		counts[s] = si.Consumers
	}
	return nil
}

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

// streamNamesResponse is a page of the server's stream names.
type streamNamesResponse struct {
	Total   int      `json:"total"`
	Streams []string `json:"streams"`
}

// StreamsTaking names the streams whose subjects overlap subject, as the
// server matches them (its stream-name list filtered by subject), without
// listing every stream.
func (a *Adapter) StreamsTaking(ctx context.Context, subject string) ([]string, error) {
	if subject == "" {
		return nil, fmt.Errorf("jsbus: no subject to match streams against")
	}
	return a.namesTaking(ctx, subject)
}

// namesTaking pages through the server's stream names, of the streams
// whose subjects overlap subject.
func (a *Adapter) namesTaking(ctx context.Context, subject string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for offset, page := 0, 0; page < maxListResponses; page++ {
		var resp streamNamesResponse
		req := struct {
			Offset  int    `json:"offset"`
			Subject string `json:"subject,omitempty"`
		}{offset, subject}
		if err := a.listRequest(ctx, "$JS.API.STREAM.NAMES", req, &resp); err != nil {
			return nil, busErr(fmt.Errorf("jsbus: list stream names: %w", err))
		}
		for _, s := range resp.Streams {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		offset += len(resp.Streams)
		if len(resp.Streams) == 0 || offset >= resp.Total {
			return out, nil
		}
	}
	return nil, fmt.Errorf("jsbus: more than %d pages of stream names", maxListResponses)
}
