package keeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A diff-kept reads in this order: diff.go (DiffKept, the page and the
// reply), diff_streams.go (each stream of the point against the live one:
// diffStreams, which a restore's dry run calls too), diff_config.go (the
// configuration), diff_seqs.go (the sequence arithmetic), diff_lists.go
// (the lists of names and sequences), diff_keys.go (a bucket's keys, a
// store's objects), diff_prefix.go (whether the point is a prefix),
// diff_page.go (the page fitted to its bounds), diff_consumers.go (the
// module's consumers then and now).

// DiffKept says what the live kept data gained, lost and changed since a
// point: per stream its state then and now, the messages appended after
// the point and the point's messages no longer live, the configuration
// fields changed, a bucket's keys and a store's objects added, changed and
// deleted; and each of the module's consumers, its position then and now.
// It is read-only: no lease, no server snapshot; it reads the point's
// manifest, and its archive only where a count or a name needs it. The
// counts are whole; the names and sequences come in pages (kept.DiffCursor):
// at most the request's limit a list, no more than half the reply bound in
// bytes, Next the cursor of the next page.
func (k *Keeper) DiffKept(ctx context.Context, r Request) (*Reply, error) {
	began := k.now()
	if err := CheckRequest(VerbDiff, r); err != nil {
		return nil, err
	}
	p, rel, err := k.locatePoint(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("diff-kept: %w, so nothing was compared", withKind(ErrFailed, err))
	}
	a, err := k.openArchive(ctx, rel, p)
	if err != nil {
		return nil, fmt.Errorf("diff-kept: %s cannot be read: %w, so nothing was compared", sourceName(p), withKind(ErrFailed, err))
	}
	defer a.Close()
	m := a.Manifest()
	if got, want := m.StreamNames(), kept.StreamSumNames(p.Streams); !slices.Equal(got, want) {
		return nil, Errorf(ErrDamaged, "diff-kept: %s: its record names streams %v but its archive holds %v, so nothing was compared", sourceName(p), want, got)
	}
	extra, err := k.liveOnlyStreams(ctx, r, m.StreamNames())
	if err != nil {
		return nil, fmt.Errorf("diff-kept of %s/%s: %w, so nothing was compared", r.Module, r.Local, err)
	}
	pg, err := newDiffPage(r, append(m.StreamNames(), extra...))
	if err != nil {
		return nil, err
	}
	ds, err := k.diffPointStreams(ctx, p, a, pg)
	if err != nil {
		return nil, fmt.Errorf("diff-kept of %s/%s: %w, so nothing more was compared", r.Module, r.Local, err)
	}
	for i, name := range extra {
		d, err := k.diffLiveOnly(ctx, name, len(m.Streams)+i, pg)
		if err != nil {
			return nil, fmt.Errorf("diff-kept of %s/%s: %w, so nothing more was compared", r.Module, r.Local, err)
		}
		ds = append(ds, d)
	}
	bound, _ := ReplyBound(ctx)
	next := fitPage(ds, bound/2)
	consumers, err := k.diffConsumers(ctx, r, p)
	if err != nil {
		return nil, fmt.Errorf("diff-kept of %s/%s: the streams were compared, but the consumers not: %w", r.Module, r.Local, err)
	}
	rep := &Reply{Dir: k.abs(rel), Streams: changesOf(ds), Consumers: consumers, Next: next}
	took := k.now().Sub(began)
	rep.TookMS = max(took.Milliseconds(), 1)
	rep.Said = diffSaid(r, p, rep, took)
	return rep, nil
}

// newDiffPage is the page r asks for, of the streams in order.
func newDiffPage(r Request, order []string) (*diffPage, error) {
	pg := &diffPage{limit: kept.DiffLimit(r)}
	if r.After == "" {
		return pg, nil
	}
	c, err := kept.ParseDiffCursor(r.After)
	if err != nil {
		return nil, fmt.Errorf("diff-kept refused: %w, so nothing was done", err)
	}
	pg.after, pg.at = &c, slices.Index(order, c.Stream)
	if pg.at < 0 {
		return nil, Errorf(ErrBadRequest, "diff-kept refused: after names stream %s, which is neither in the point nor live in %s/%s, so nothing was done",
			c.Stream, r.Module, r.Local)
	}
	return pg, nil
}

// liveOnlyStreams names the streams of the kept data on the bus that the
// point does not hold, sorted.
func (k *Keeper) liveOnlyStreams(ctx context.Context, r Request, pointStreams []string) ([]string, error) {
	live, _, err := k.liveStreams(ctx, r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range live {
		if !slices.Contains(pointStreams, s.Name) {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// diffLiveOnly is a live stream of the kept data the point does not hold,
// at index i of the page's order: every live message is appended.
func (k *Keeper) diffLiveOnly(ctx context.Context, name string, i int, pg *diffPage) (streamDiff, error) {
	live, err := k.bus.StreamDetail(ctx, name)
	if errors.Is(err, ErrNoStream) {
		live = &StreamDetail{StreamInfo: StreamInfo{Name: name}} // gone meanwhile: it holds nothing
	} else if err != nil {
		return streamDiff{}, Errorf(ErrFailed, "reading the live stream %s: %v", name, err)
	}
	kind, _ := streamKind(name, live.Subjects)
	ls := liveSeqs{first: live.FirstSeq, last: live.LastSeq, deleted: live.Deleted}
	d := streamDiff{Live: live, Change: kept.StreamChange{Stream: name, Kind: kind,
		Now: &kept.SeqState{FirstSeq: live.FirstSeq, LastSeq: live.LastSeq, Messages: live.Messages, Bytes: live.Bytes}}}
	c := countSeqs(0, 0, 0, ls)
	d.Change.Appended = c.appended
	if c.appended > 0 {
		d.TailFirst, d.TailLast, d.TailCount = c.tailFirst, ls.last, c.appended
	}
	if want, after := pg.from(i, kept.DiffAppended); want && c.appended > 0 {
		rl := &rangeList{after: after.Seq, limit: pg.limit}
		appendedRanges(0, ls, rl)
		d.Change.AppendedSeqs, d.cut[0] = rl.strings(), rl.cut
	}
	return d, nil
}

// changesOf is the changes of ds, as a reply holds them.
func changesOf(ds []streamDiff) []kept.StreamChange {
	out := make([]kept.StreamChange, len(ds))
	for i, d := range ds {
		out[i] = d.Change
	}
	return out
}

// diffSaid is the sentence of a diff: its totals, the consumers moved,
// whether names continue on a next page, and how long it took.
func diffSaid(r Request, p *Point, rep *Reply, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Since %s (taken %s), the live %s/%s has %s", sourceName(p), p.Taken.UTC().Format("2006-01-02 15:04:05Z"),
		r.Module, r.Local, kept.TotalsOf(rep.Streams))
	moved := 0
	for _, c := range rep.Consumers {
		if c.Now != c.Then || c.Gone || c.New {
			moved++
		}
	}
	fmt.Fprintf(&b, "; %d of %d consumer(s) of %s moved, came or went", moved, len(rep.Consumers), r.Module)
	if rep.Next != "" {
		b.WriteString("; more names and sequences follow (ask again with after set to next)")
	}
	fmt.Fprintf(&b, ". Compared in %.3f s; nothing was changed.", took.Seconds())
	return b.String()
}
