package keeper

import (
	"context"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

// diffLists fills d's lists of the page: the appended and removed
// sequences, and a bucket's keys or a store's objects.
func (k *Keeper) diffLists(ctx context.Context, a *openedArchive, sm *busarchive.StreamManifest, i int, pg *diffPage,
	d *streamDiff, ls liveSeqs, c seqCounts, prefix string) error {
	span := sm.Span() // a stream cut: up to the first message it left out
	if want, after := pg.from(i, kept.DiffAppended); want && c.appended > 0 {
		rl := &rangeList{after: after.Seq, limit: pg.limit}
		appendedRanges(span.LastSeq, ls, rl)
		d.Change.AppendedSeqs, d.cut[0] = rl.strings(), rl.cut
	}
	var removed *rangeList
	if want, after := pg.from(i, kept.DiffRemoved); want && c.removed > 0 {
		removed = &rangeList{after: after.Seq, limit: pg.limit}
		if c.gaps == 0 {
			removedRanges(span.FirstSeq, span.LastSeq, ls, removed)
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
	// The removed sequences of a point with gaps of its own are read
	// from its messages, with the keys when they are wanted too.
	var fromPoint *rangeList
	if removed != nil && c.gaps > 0 {
		fromPoint = removed
	}
	if kd != nil || fromPoint != nil {
		if err := readPointMessages(ctx, a, sm.Name, ls, kd, fromPoint); err != nil {
			return err
		}
	}
	if removed != nil {
		d.Change.RemovedSeqs, d.cut[1] = removed.strings(), removed.cut
	}
	if kd == nil {
		// Nothing came or went: no key changed.
		switch d.Change.Kind {
		case kindKV:
			d.Change.Keys = &kept.KeyChanges{}
		case kindObject:
			d.Change.Objects = &kept.KeyChanges{}
		}
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
