package jsbus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// upstreamRef is a mirror or source of a stream's configuration.
type upstreamRef struct {
	Name     string `json:"name"`
	External *struct {
		API string `json:"api"`
	} `json:"external"`
}

// Downstreams lists every stream of the adapter's JetStream (its account,
// in its domain) whose mirror or one of whose sources names one of
// streams, sorted by stream and upstream. A mirror or source counts when
// it is in this JetStream: no external API prefix (the server refuses
// $JS.API as one), or $JS.<domain>.API of the adapter's domain. Another
// domain's or account's stream of the same name is not the one restored and
// is left out, and so are streams of other domains or accounts that mirror
// or source these (they are not in this list).
//
// It answers from the census book (bookDownstreams), which keeps each
// stream's upstreams from the full census's list and from the fresh read
// of each stream an advisory named (created, updated, restored), so it asks
// the server nothing that grows with the bus. It lists every stream of the
// account instead, page by page (listDownstreams), when the book cannot
// answer: the advisories cannot be heard, the book is not seeded or not
// trusted (a reconnect, advisories dropped), the bus holds more consumers
// than the book does, the book holds a stream whose upstreams it does not
// know (past its bounds, or whose server did not answer the full census),
// or the account's count of streams does not confirm the book.
//
// What the book cannot see: a stream's update sends its advisory from the
// stream's own queue, which may follow the reply to the update; a call
// made within that moment does not see a source the update added. (A
// stream made or deleted within it is caught by the account's count.)
func (a *Adapter) Downstreams(ctx context.Context, streams []string) ([]keeper.Downstream, error) {
	want := map[string]bool{}
	for _, s := range streams {
		want[s] = true
	}
	if ds, ok := a.bookDownstreams(ctx, want); ok {
		return ds, nil
	}
	return a.listDownstreams(ctx, streams, want)
}

// bookDownstreams answers Downstreams from the census book: it takes the
// advisories sent before now and reads what they name, as a census does,
// and takes the book's answer once the account's count of streams equals
// the book's and the book is still trusted, trying censusTries times a
// random pause apart (a stream's advisory on its way). ok is false when
// the book cannot answer.
func (a *Adapter) bookDownstreams(ctx context.Context, want map[string]bool) (ds []keeper.Downstream, ok bool) {
	w := a.census
	for try := 1; try <= censusTries; try++ {
		if !w.trusted(a.connMark()) {
			return nil, false
		}
		ds, known, confirmed, err := a.bookDownstreamsOnce(ctx, want)
		switch {
		case err != nil:
			a.log.Debug("the census book could not answer which streams mirror or source the restored ones, so every stream is listed", "err", err)
			return nil, false
		case !known:
			a.log.Debug("the census book does not know the mirror and sources of some streams, so every stream is listed")
			return nil, false
		case confirmed:
			return ds, true
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(rand.N(censusPause) + time.Millisecond):
		}
	}
	a.log.Debug("the account's count of streams did not confirm the census book, so every stream is listed", "tries", censusTries)
	return nil, false
}

// bookDownstreamsOnce is one try of bookDownstreams: known is false when
// the book holds a stream whose upstreams it does not know, confirmed when
// the account's count of streams equals the book's and the book is still
// trusted after.
func (a *Adapter) bookDownstreamsOnce(ctx context.Context, want map[string]bool) (ds []keeper.Downstream, known, confirmed bool, err error) {
	w := a.census
	if err := a.catchUp(ctx); err != nil {
		return nil, false, false, err
	}
	totals, err := a.accountTotals(ctx)
	if err != nil {
		return nil, false, false, err
	}
	w.mu.Lock()
	ds, known = w.book.downstreams(want)
	n := len(w.book.streams)
	w.mu.Unlock()
	return ds, known, known && totals.Streams == n && w.trusted(a.connMark()), nil
}

// listDownstreams answers Downstreams from the server's stream list, page
// by page. A stream whose server did not answer the list (offline, or no
// leader) cannot be read and is named in a warning.
func (a *Adapter) listDownstreams(ctx context.Context, streams []string, want map[string]bool) ([]keeper.Downstream, error) {
	set := newDownstreamSet(want)
	listed, err := a.listStreams(ctx, func(s string, c upstreamConfig) { set.add(s, a.upstreamsOf(c)) })
	if err != nil {
		return nil, busErr(fmt.Errorf("jsbus: the streams that mirror or source %s are not known: listing the account's streams failed: %w", strings.Join(streams, ", "), err))
	}
	var unread []string
	for _, s := range listed {
		if s.Consumers < 0 {
			unread = append(unread, s.Name)
		}
	}
	if len(unread) > 0 {
		a.log.Warn("some streams did not answer the stream list (offline, or no leader), so whether they mirror or source a restored stream is not known",
			"streams", slices.Sorted(slices.Values(unread)))
	}
	return set.sorted(), nil
}

// ownUpstream reports whether a mirror or source is in the adapter's own
// JetStream (see Downstreams).
func (a *Adapter) ownUpstream(up upstreamRef) bool {
	if up.External == nil {
		return true
	}
	api := strings.TrimSuffix(up.External.API, ".")
	return api == "" || (a.cfg.domain != "" && api == "$JS."+a.cfg.domain+".API")
}
