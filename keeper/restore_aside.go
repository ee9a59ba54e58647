package keeper

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// maxAsideTries bounds the ids tried for one aside: <base>, <base>-2, …
const maxAsideTries = 999

// setAsideFor sets the plan's live data aside, if any is live: only once
// this is complete, verified and recorded may any live stream be removed.
// When the plan verifies its point beside the set-aside, the aside counts,
// and anything live is removed, only once that passed. It returns the aside
// (nil when nothing is live), its verification, and what stops the
// verification beside it, to be called when the restore ends.
func (k *Keeper) setAsideFor(ctx context.Context, r Request, pl *restorePlan) (*Aside, *busarchive.Report, func(), error) {
	stop := func() {}
	if len(pl.SetAside) == 0 {
		return nil, nil, stop, nil
	}
	asideCtx := ctx
	var pointOK func() error // nil: nothing to wait for
	var beside *besideVerify
	if pl.verifyLater {
		beside = k.verifyBeside(ctx, r, pl)
		stop = beside.stop
		asideCtx, pointOK = beside.aside, beside.wait
	}
	aside, rep, err := k.setAside(asideCtx, r, pl, pointOK)
	if err == nil {
		return aside, rep, stop, nil
	}
	if beside != nil {
		if verr := beside.failed(); verr != nil {
			return nil, nil, stop, fmt.Errorf("restore-kept of %s/%s: %w, so nothing was set aside or removed", r.Module, r.Local, verr)
		}
	}
	return nil, nil, stop, fmt.Errorf("restore-kept of %s/%s: setting the live data aside failed: %w, so nothing was removed",
		r.Module, r.Local, withKind(ErrFailed, err))
}

// newAside picks a new aside id, <module>.<local>.<UTC yyyymmddThhmmss>
// made unique with -N if taken: an id is taken when any object lies under
// it (a committed aside, or leftovers of one that was not). Two verbs of one
// kept data never run at once (its lease), and ids of different kept data
// differ, so the id stays free until the aside is written. Bounded tries.
func (k *Keeper) newAside(ctx context.Context, module, local string) (string, error) {
	base := module + "." + local + "." + k.now().UTC().Format("20060102T150405")
	for n := 1; n <= maxAsideTries; n++ {
		id := base
		if n > 1 {
			id = base + "-" + strconv.Itoa(n)
		}
		objs, err := k.store.List(ctx, asideRel(id)+"/")
		if err != nil {
			return "", fmt.Errorf("making set-aside copy %s: %w", id, err)
		}
		if len(objs) == 0 {
			return id, nil
		}
	}
	return "", fmt.Errorf("making a set-aside copy: %s and %d more ids are all taken", base, maxAsideTries-1)
}

// setAside snapshots the plan's live streams into a new aside for restore
// r, and returns it with its verification's report. pointOK is waited for
// before the aside's commit mark (see setAsideStreams).
func (k *Keeper) setAside(ctx context.Context, r Request, pl *restorePlan, pointOK func() error) (*Aside, *busarchive.Report, error) {
	reason := ReasonRestore
	if r.AsideOnly {
		reason = ReasonAsideOnly
	}
	return k.setAsideWith(ctx, r, pl.SetAside, pl.delta, reason, pl.pointRel, pointOK)
}

// setAsideStreams snapshots the live streams into a new aside, verifies it,
// writes its aside.json (the commit mark), records it, and checks that no stream took a new
// message meanwhile. Only when it returns nil may the live streams be
// removed. Before the commit mark it waits for pointOK (nil: nothing to
// wait for), the verification of the point a rollback restores, made
// meanwhile: if that fails, so does this. On error, nothing was removed and
// no partial aside is left. It returns the aside and the report of its
// verification.
func (k *Keeper) setAsideStreams(ctx context.Context, r Request, streams []string, reason, pointRel string, pointOK func() error) (*Aside, *busarchive.Report, error) {
	return k.setAsideWith(ctx, r, streams, nil, reason, pointRel, pointOK)
}

// setAsideWith is setAsideStreams where, of each stream of tails (a delta
// restore's, from the point at pointRel), only its tail is set aside
// (takeTail), marked so in the aside's record (markTails); its consumers'
// positions are read live, as those of a stream the aside does not carry.
func (k *Keeper) setAsideWith(ctx context.Context, r Request, streams []string, tails []deltaStream, reason, pointRel string, pointOK func() error) (_ *Aside, _ *busarchive.Report, err error) {
	if err := k.canReadOwn(); err != nil {
		return nil, nil, err
	}
	id, err := k.newAside(ctx, r.Module, r.Local)
	if err != nil {
		return nil, nil, err
	}
	rel := asideRel(id)
	placed := false
	defer func() {
		if !placed && err != nil { // refused: what it wrote goes before the verb answers
			err = k.dropUnplaced(ctx, rel, err)
		}
	}()
	var live, whole []StreamInfo // whole: those set aside whole
	for _, s := range streams {
		si, err := k.bus.Stream(ctx, s)
		if err != nil {
			continue
		}
		if ds := deltaIn(tails, s); ds != nil {
			si.Bytes = tailBytes(*si, ds) // what the aside takes of it
		} else {
			whole = append(whole, *si)
		}
		live = append(live, *si)
	}
	take := k.takeTails(tails, k.bus.Snapshot) // a tail's entry, or the server's snapshot
	pb, err := k.readPositionsBefore(ctx, r.Module, r.Local, whole)
	if err != nil {
		return nil, nil, err
	}
	if err := k.checkRoom(ctx, storedBytes(live), k.spoolBound(live)); err != nil {
		return nil, nil, err
	}
	m, w, err := k.snapshotArchiveWith(ctx, rel, streams, pb.take(take),
		Progress{Verb: VerbRestore, Module: r.Module, Local: r.Local, Step: "aside", BytesTotal: storedBytes(live)})
	if err != nil {
		return nil, nil, err
	}
	defer w.Abort()
	positions, err := pb.positions(ctx, k)
	if err != nil {
		return nil, nil, err
	}
	if err := checkPositionsFit(positions, asideFile); err != nil {
		return nil, nil, err
	}
	info, err := w.Commit(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("writing the set-aside copy to the store: %w", k.roomRefused(err, m.Bytes()))
	}
	a := &Aside{ID: id, Module: r.Module, Local: r.Local, Taken: k.now().UTC(), Caller: r.Caller, Why: r.Why,
		Reason: reason, Point: pointRel, Dir: rel, Streams: streamSums(m), Positions: positions, PositionCount: len(positions),
		ArchiveSize: info.Size, ArchiveSum: info.Sum, Sealing: k.sealingOf(w)}
	if len(tails) > 0 {
		markTails(a.Streams, tails, pointRel)
		a.Format = RecordFormatTails // a keeper before it would take a tail for a whole stream
	}
	rep, err := k.checkAside(ctx, a, m)
	if err != nil {
		return nil, nil, err
	}
	if pointOK != nil {
		k.hook("aside:point-wait") // for tests: the aside is whole, not yet committed
		if err := pointOK(); err != nil {
			return nil, nil, err
		}
	}
	if _, err := k.putJSON(ctx, recordKey(rel), a); err != nil { // the commit mark
		return nil, nil, fmt.Errorf("writing aside.json: %w", k.roomRefused(err, m.Bytes()))
	}
	placed = true
	if err := k.recordAside(ctx, a); err != nil {
		return nil, nil, err
	}
	k.hook("aside-committed") // for tests: the aside counts, no journal yet
	return a, rep, nil
}

// recordAside puts aside.<id> in the index.
func (k *Keeper) recordAside(ctx context.Context, a *Aside) error {
	if err := k.index.Put(ctx, asideKey(a.ID), asideRecord(a)); err != nil {
		return fmt.Errorf("the set-aside copy is complete in %s but could not be recorded in the index: %w", k.abs(a.Dir), err)
	}
	return nil
}
