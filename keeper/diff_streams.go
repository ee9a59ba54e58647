package keeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

// A diff reads, per stream of a point, the point's manifest (its config
// and state), the live stream's details (its config, first and last
// sequence and deleted sequences), and only where a count or a name needs
// them the live tail (the messages after the point's last sequence) and
// the point's archive: the point's own messages when its state shows gaps
// of its own and some are no longer live, and a KV bucket's or object
// store's keys when any message came or went. A stream of 1 GiB with 1 MiB
// appended is diffed from its details alone.

// streamDiff is one stream of a point against the live bus: the change a
// reply says, and what a restore method needs to choose and act.
type streamDiff struct {
	Change kept.StreamChange
	// Live is the live stream as the diff read it; nil when it is not on
	// the bus.
	Live *StreamDetail
	// The tail: the live messages after the point's last sequence, their
	// first and last sequence and how many (0, 0, 0: none).
	TailFirst, TailLast, TailCount uint64

	// cut says, per list of kept.DiffLists, that the page left some of
	// its entries out.
	cut [len(kept.DiffLists)]bool
}

// diffStreams diffs every stream of the point p, whose archive a is
// opened, against the live bus, in the point's order; each list of names
// and sequences holds at most limit entries from its start.
func (k *Keeper) diffStreams(ctx context.Context, p *Point, a *openedArchive, limit int) ([]streamDiff, error) {
	ds, err := k.diffPointStreams(ctx, p, a, &diffPage{limit: limit})
	for i := range ds {
		ds[i].markCuts()
	}
	return ds, err
}

// diffPointStreams is diffStreams of one page.
func (k *Keeper) diffPointStreams(ctx context.Context, p *Point, a *openedArchive, pg *diffPage) ([]streamDiff, error) {
	m := a.Manifest()
	out := make([]streamDiff, 0, len(m.Streams))
	for i := range m.Streams {
		d, err := k.diffStream(ctx, a, &m.Streams[i], i, pg)
		if err != nil {
			return nil, fmt.Errorf("diffing stream %s of %s: %w", m.Streams[i].Name, sourceName(p), err)
		}
		out = append(out, d)
	}
	return out, nil
}

// diffStream diffs one stream of the point (sm, at index i of the page's
// order).
func (k *Keeper) diffStream(ctx context.Context, a *openedArchive, sm *busarchive.StreamManifest, i int, pg *diffPage) (streamDiff, error) {
	st := sm.Span() // a stream cut: up to the first message it left out
	d := streamDiff{Change: kept.StreamChange{Stream: sm.Name,
		Then: &kept.SeqState{FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Messages: st.Msgs, Bytes: st.Bytes}}}
	kind, prefix := streamKind(sm.Name, sm.Config.Subjects)
	d.Change.Kind = kind
	live, err := k.bus.StreamDetail(ctx, sm.Name)
	switch {
	case errors.Is(err, ErrNoStream):
		live = nil
	case err != nil:
		return d, Errorf(ErrFailed, "reading the live stream %s: %v", sm.Name, err)
	}
	var ls liveSeqs
	if live != nil {
		d.Live, ls = live, liveSeqs{first: live.FirstSeq, last: live.LastSeq, deleted: live.Deleted}
		d.Change.Now = &kept.SeqState{FirstSeq: live.FirstSeq, LastSeq: live.LastSeq, Messages: live.Messages, Bytes: live.Bytes}
		if d.Change.Config, err = configChanges(sm.Config.Raw, live.Config); err != nil {
			return d, Errorf(ErrFailed, "comparing the configuration of %s: %v", sm.Name, err)
		}
	}
	c := countSeqs(st.FirstSeq, st.LastSeq, st.Msgs, ls)
	d.Change.Appended, d.Change.Removed = c.appended, c.removed
	if c.appended > 0 {
		d.TailFirst, d.TailLast, d.TailCount = c.tailFirst, ls.last, c.appended
	}
	if err := k.diffLists(ctx, a, sm, i, pg, &d, ls, c, prefix); err != nil {
		return d, err
	}
	return d, nil
}
