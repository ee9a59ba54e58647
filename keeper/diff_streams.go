package keeper

import (
	"context"
	"encoding/json"
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
	// Prefix: the point is a prefix of the live stream (changes.md): every
	// message the point holds is still live at its sequence (the same
	// first sequence, and the live deleted set inside the point's
	// first..last is the point's own), the configuration differs only in
	// fields a stream update can set back (configChanges), and the tail
	// can be deleted (the live stream is neither sealed nor denies
	// deletes). NotPrefix says why not, as a sentence's end ("12 messages
	// of the point were deleted since").
	Prefix    bool
	NotPrefix string
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
	st := sm.State
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
	fixed := ""
	if live != nil {
		d.Live, ls = live, liveSeqs{first: live.FirstSeq, last: live.LastSeq, deleted: live.Deleted}
		d.Change.Now = &kept.SeqState{FirstSeq: live.FirstSeq, LastSeq: live.LastSeq, Messages: live.Messages, Bytes: live.Bytes}
		if d.Change.Config, fixed, err = configChanges(sm.Config.Raw, live.Config); err != nil {
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
	d.NotPrefix = notPrefix(d, c, fixed)
	d.Prefix = d.NotPrefix == ""
	return d, nil
}

// diffLists fills d's lists of the page: the appended and removed
// sequences, and a bucket's keys or a store's objects.
func (k *Keeper) diffLists(ctx context.Context, a *openedArchive, sm *busarchive.StreamManifest, i int, pg *diffPage,
	d *streamDiff, ls liveSeqs, c seqCounts, prefix string) error {
	if want, after := pg.from(i, kept.DiffAppended); want && c.appended > 0 {
		rl := &rangeList{after: after.Seq, limit: pg.limit}
		appendedRanges(sm.State.LastSeq, ls, rl)
		d.Change.AppendedSeqs, d.cut[0] = rl.strings(), rl.cut
	}
	var removed *rangeList
	if want, after := pg.from(i, kept.DiffRemoved); want && c.removed > 0 {
		removed = &rangeList{after: after.Seq, limit: pg.limit}
		if c.gaps == 0 {
			removedRanges(sm.State.FirstSeq, sm.State.LastSeq, ls, removed)
		}
	}
	var kd *keyDiff
	if prefix != "" && (c.appended > 0 || c.removed > 0) {
		kd = newKeyDiff(d.Change.Kind, prefix)
		if c.appended > 0 {
			if err := k.bus.Messages(ctx, sm.Name, c.tailFirst, ls.last, func(m Message) error { kd.live(m); return nil }); err != nil {
				return Errorf(ErrFailed, "reading the messages of %s after the point: %v", sm.Name, err)
			}
		}
	}
	readRemoved := removed != nil && c.gaps > 0
	if kd != nil || readRemoved {
		if !readRemoved {
			removed = nil
		}
		if err := readPointMessages(ctx, a, sm.Name, ls, kd, removed); err != nil {
			return err
		}
	}
	if removed != nil {
		d.Change.RemovedSeqs, d.cut[1] = removed.strings(), removed.cut
	}
	if kd == nil {
		return nil
	}
	if d.Live != nil {
		if err := kd.readLast(ctx, k.bus, sm.Name); err != nil {
			return Errorf(ErrFailed, "reading the last messages of the keys of %s: %v", sm.Name, err)
		}
	}
	list := kept.DiffKeys
	if d.Change.Kind == kindObject {
		list = kept.DiffObjects
	}
	want, after := pg.from(i, list)
	kc, cut := kd.changes(after.Name, after.Start, pg.limit)
	if !want {
		kc.Names, cut = nil, false
	}
	if list == kept.DiffKeys {
		d.Change.Keys, d.cut[2] = kc, cut
	} else {
		d.Change.Objects, d.cut[3] = kc, cut
	}
	return nil
}

// errEnough stops the reading of an archive that gave what was wanted.
var errEnough = errors.New("read enough")

// readPointMessages reads the point's messages of stream from its archive
// (checked against its manifest as it is read): each one no longer live
// into removed (nil: none wanted), and each into kd (nil: none).
func readPointMessages(ctx context.Context, a *openedArchive, stream string, ls liveSeqs, kd *keyDiff, removed *rangeList) error {
	rc, err := a.CheckedStreamData(ctx, stream)
	if err != nil {
		return pointReadError(a, stream, err)
	}
	defer rc.Close()
	_, err = busarchive.ReadStreamArchive(rc, nil, func(m busarchive.ArchivedMessage) error {
		gone := !ls.has(m.Seq)
		if gone && removed != nil && !removed.add(m.Seq, m.Seq) && kd == nil {
			return errEnough
		}
		if kd != nil {
			kd.point(m.Seq, m.Subject, m.Header, m.Data, gone)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return pointReadError(a, stream, err)
	}
	return nil
}

// pointReadError is the error of reading the point's stream: the archive
// is damaged where busarchive found problems in it, else the reading
// failed.
func pointReadError(a *openedArchive, stream string, err error) error {
	if len(busarchive.Problems(err)) > 0 {
		return &DamagedError{Path: a.Where, Problems: problemSentences(err)}
	}
	return fmt.Errorf("reading the point's stream %s: %w", stream, withKind(ErrFailed, err))
}

// notPrefix says why the point is not a prefix of the live stream, or "".
func notPrefix(d streamDiff, c seqCounts, fixed string) string {
	live := d.Live
	switch {
	case live == nil:
		return "the stream is not on the bus"
	case live.LastSeq < c.point:
		return fmt.Sprintf("the live stream's last sequence %d is below the point's %d: it was made again since", live.LastSeq, c.point)
	case c.extra > 0:
		return fmt.Sprintf("the live stream holds %s %s at or below the point's last sequence that the point lacks: it was made again since",
			kept.Thousands(c.extra), kept.Plural(int(min(c.extra, 2)), "message", "messages"))
	case c.removed > 0:
		return fmt.Sprintf("%s %s of the point %s deleted since", kept.Thousands(c.removed),
			kept.Plural(int(min(c.removed, 2)), "message", "messages"), kept.Plural(int(min(c.removed, 2)), "was", "were"))
	case fixed != "":
		return "its configuration cannot be set back: " + fixed
	}
	if c.appended > 0 {
		if f := liveFlags(live.Config); f.Sealed || f.DenyDelete {
			return fmt.Sprintf("the live stream is sealed or denies message deletes, so the %s %s after the point cannot be removed",
				kept.Thousands(c.appended), kept.Plural(int(min(c.appended, 2)), "message", "messages"))
		}
	}
	return ""
}

// streamFlags are the fields of a live configuration that keep its
// messages.
type streamFlags struct {
	Sealed     bool `json:"sealed"`
	DenyDelete bool `json:"deny_delete"`
}

func liveFlags(cfg json.RawMessage) streamFlags {
	var f streamFlags
	_ = json.Unmarshal(cfg, &f) // configChanges read it before
	return f
}
