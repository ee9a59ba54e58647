package keeper

import (
	"context"
	"fmt"
)

// earlier is the setting aside (reason replaced) of an earlier point of the
// same form and fingerprint as a point being taken, made ready while the
// new point's archive is written: its archive copied into a new aside and
// its aside.json made, neither visible (an aside is one once its aside.json
// is written). setAside finishes it once the new archive is whole;
// abandon removes what was made ready when the new point is not committed,
// so a snapshot that fails leaves the earlier point as it was.
type earlier struct {
	k      *Keeper
	done   chan struct{}
	cancel context.CancelFunc // ends the preparation

	// Set in the background before done closes.
	aside   *Aside // nil: there is no earlier point
	copyKey string // the key of its archive's copy
	data    []byte // its aside.json
	err     error

	used bool // setAside ran: nothing is left to abandon
}

// prepareReplace begins, in the background, to make the point at rel, if
// there is one, ready to set aside: its point.json is read, a new aside id
// taken, its archive copied there (a hard link or a server-side copy
// where the store has one) and its aside.json made.
func (k *Keeper) prepareReplace(ctx context.Context, r Request, rel string) *earlier {
	ctx, cancel := context.WithCancel(ctx)
	e := &earlier{k: k, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(e.done)
		e.aside, e.copyKey, e.data, e.err = k.copyEarlier(ctx, r, rel)
	}()
	return e
}

// setAside sets the earlier point aside: its aside.json is written and
// recorded, and only then is the point's point.json removed. So at every
// instant the earlier point is whole, as a point or as an aside, and the
// new one becomes visible only with its own point.json, written after
// this. It returns nil when there was no earlier point.
func (e *earlier) setAside(ctx context.Context) (*Aside, error) {
	<-e.done
	e.cancel()
	e.used = true
	k, a := e.k, e.aside
	if e.err != nil {
		return nil, e.err
	}
	if a == nil {
		return nil, nil
	}
	// The copy waited in the store, without a record, while the snapshot
	// ran: a keeper whose clock is far ahead may have judged the lease on
	// it lapsed and swept it. An aside.json over a missing archive would
	// lose the earlier point.
	if err := k.copyWhole(ctx, a, e.copyKey); err != nil {
		return nil, err
	}
	if _, err := k.putBytes(ctx, recordKey(a.Dir), e.data); err != nil {
		return nil, k.dropUnplaced(ctx, a.Dir, fmt.Errorf("writing its aside.json: %w", k.roomRefused(err, a.ArchiveSize)))
	}
	if err := k.recordAside(ctx, a); err != nil {
		k.log.Warn("the replaced point is set aside but not recorded in the index; a restart rebuilds it", "aside", a.ID, "err", err)
	}
	if err := k.store.Delete(ctx, recordKey(a.Point)); err != nil {
		return a, fmt.Errorf("removing its point.json after it was set aside as %s: %w", a.ID, err)
	}
	return a, nil
}

// copyWhole checks that the archive's copy at key is still whole; an
// incremental point's aside has none.
func (k *Keeper) copyWhole(ctx context.Context, a *Aside, key string) error {
	if a.Incremental {
		return nil
	}
	info, err := k.store.Stat(ctx, key)
	if err == nil && info.Size == a.ArchiveSize {
		return nil
	}
	why := fmt.Sprintf("%d bytes, not %d", info.Size, a.ArchiveSize)
	if err != nil {
		why = err.Error()
	}
	return k.dropUnplaced(ctx, a.Dir, fmt.Errorf("its archive's copy %s is no longer whole in the store (%s)", k.abs(key), why))
}

// abandon ends the preparation and, unless setAside ran, removes the copy
// it made: without its aside.json it is no aside, only leftovers.
func (e *earlier) abandon(ctx context.Context) {
	if e.used {
		return
	}
	e.cancel()
	<-e.done
	if e.aside == nil {
		return
	}
	e.used = true
	if err := e.k.removePrefix(context.WithoutCancel(ctx), e.aside.Dir); err != nil {
		e.k.log.Warn("the copy made to set the earlier point aside is left; the next start sweeps it", "dir", e.k.abs(e.aside.Dir), "err", err)
	}
}

// copyEarlier makes the point at rel ready to set aside: the aside it
// becomes, the key of its archive's copy at the aside's place, and that
// aside's aside.json. A nil aside when there is no point at rel.
func (k *Keeper) copyEarlier(ctx context.Context, r Request, rel string) (*Aside, string, []byte, error) {
	there, err := k.exists(ctx, recordKey(rel))
	if err != nil || !there {
		return nil, "", nil, err
	}
	a := &Aside{Module: r.Module, Local: r.Local, Taken: k.now().UTC(), Caller: r.Caller,
		Why:    "replaced by a new restore point of the same form and fingerprint",
		Reason: ReasonReplaced, Point: rel, Streams: []StreamSum{}}
	src := archiveKey(rel)
	old, err := k.loadSource(ctx, rel)
	if err == nil {
		a.Streams, a.Positions, a.PositionCount, a.Sealing = withoutKeyIndexes(old.Streams), old.Positions, len(old.Positions), old.Sealing
		src = archiveKeyOf(rel, old)
	} else {
		old = nil
		k.log.Warn("the replaced point's point.json is unreadable; it is set aside as it is", "dir", k.abs(rel), "err", err)
		if _, err := k.store.Stat(ctx, rel+"/"+sealedName); err == nil {
			// Encrypted, to recipients its lost record named.
			src, a.Sealing = rel+"/"+sealedName, Sealing{Archive: sealedName, Encrypted: &Encryption{Format: "age", Recipients: []string{}}}
		}
	}
	id, err := k.newAside(ctx, r.Module, r.Local)
	if err != nil {
		return nil, "", nil, err
	}
	a.ID, a.Dir = id, asideRel(id)
	if old != nil && old.Incremental {
		return incrementalAside(a, old)
	}
	dst := archiveKeyOf(a.Dir, &Point{Sealing: a.Sealing})
	info, err := k.copyObject(ctx, src, dst)
	if err != nil {
		k.store.Delete(context.WithoutCancel(ctx), dst)
		return nil, "", nil, fmt.Errorf("copying its archive: %w", err)
	}
	a.ArchiveSize, a.ArchiveSum = info.Size, info.Sum
	if a.ArchiveSum == "" && old != nil && old.ArchiveSize == info.Size {
		// A copy the store made without reading it (a hard link) has no
		// sum of its own: the bytes are the point's, whose record has it.
		a.ArchiveSum = old.ArchiveSum
	}
	data, err := recordJSON(a)
	if err == nil {
		err = checkRecordSize(recordKey(a.Dir), data)
	}
	if err != nil {
		k.store.Delete(context.WithoutCancel(ctx), dst)
		return nil, "", nil, fmt.Errorf("making its aside.json: %w", err)
	}
	return a, dst, data, nil
}

// incrementalAside makes the incremental point old ready to set aside as
// a: it has no archive to copy, so the aside is its record (its base, the
// segments it reaches and its moment), which keeps its base and segments
// from retention as the point did (incrementalBases).
func incrementalAside(a *Aside, old *Point) (*Aside, string, []byte, error) {
	a.Incremental, a.Base, a.Through, a.At, a.Format = true, old.Base, old.Through, old.At, RecordFormatIncremental
	data, err := recordJSON(a)
	if err == nil {
		err = checkRecordSize(recordKey(a.Dir), data)
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("making its aside.json: %w", err)
	}
	return a, "", data, nil
}

// withoutKeyIndexes is the streams without their key indexes: an aside
// copies only a point's archive, not its key indexes.
func withoutKeyIndexes(streams []StreamSum) []StreamSum {
	out := make([]StreamSum, len(streams))
	for i, s := range streams {
		s.KeyIndex = nil
		out[i] = s
	}
	return out
}
