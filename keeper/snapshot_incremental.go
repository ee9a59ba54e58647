package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// With capture on, snapshot-kept takes an incremental point: it waits for
// the capture to reach the request's moment, and records the point as the
// chain's base plus its segments up to then (point.json: incremental, base,
// through, at), with no archive of its own and no server snapshot read. Its
// cost follows the capture's lag, not the kept data's size. A verb that
// reads its archive (restore, diff) makes the point of its moment from the
// base and the segments first (openArchive, materialize), once: that point
// is kept beside it as f<form>-at-<moment>. verify-kept composes that
// archive and checks it without writing it (verify_incremental.go), as
// export and copy compose it where no keeper runs (ComposeMoment).

// incrementalWait bounds how long snapshot-kept waits for the capture to
// reach the request's moment, beyond three of its segment intervals; a
// capture that lags more gives a full point instead.
const incrementalWait = 10 * time.Second

// snapshotIncremental takes the incremental point of r, or returns nil (no
// point, no error) when the kept data is not captured or the capture does
// not reach the moment in time: the caller takes a full point then.
func (k *Keeper) snapshotIncremental(ctx context.Context, r Request, live []StreamInfo) (*Reply, error) {
	if captureBase(r) {
		return nil, nil // a capture's base is a full point
	}
	at, cut := cutOf(ctx)
	if !cut {
		at = k.now().UTC()
	}
	// A full point stands in for one that cannot be taken, cut at the same
	// moment (SnapshotKept).
	rec, err := k.captureRecord(ctx, r.Module, r.Local)
	if err != nil || !rec.On {
		return nil, nil
	}
	ch, through, ok := (*chain)(nil), uint64(0), false
	if !cut {
		// The capture may hold all the streams hold already: the point
		// is then the moment it last saw them, with no wait.
		ch, through, at, ok = k.captureHolds(ctx, rec, live, at)
	}
	if !ok {
		ch, through, ok = k.awaitCapture(ctx, rec, at)
	}
	if !ok {
		k.log.Warn("the capture does not reach the point's moment; taking a full point", "kept", r.Module+"/"+r.Local, "at", at)
		return nil, nil
	}
	if !sameStreams(ch, live) {
		return nil, nil
	}
	base, err := k.readRecord(ctx, ch.base, true)
	if err != nil {
		if cut {
			return nil, err
		}
		return nil, nil
	}
	positions := base.Positions
	// The newest sample at or before the point: read back from its last
	// segment, most often that one.
	for i := int(through) - 1; i >= 0; i-- {
		seg, err := k.segmentOf(ctx, ch, i)
		if err != nil {
			return nil, err
		}
		if !seg.PositionsAt.After(at) {
			positions = seg.Positions
			break
		}
	}
	rel := pointRel(r.Module, r.Local, r.Form, r.Fingerprint)
	point := &Point{
		Module: r.Module, Local: r.Local, Form: r.Form, Fingerprint: r.Fingerprint, CatchUp: r.CatchUp,
		Taken: at, Caller: r.Caller, Why: r.Why, Dir: rel, Positions: slices.Clone(positions), PositionCount: len(positions),
		Format: RecordFormatIncremental, WrittenBy: k.version, At: &at, Base: ch.base, Incremental: true, Through: through,
	}
	for _, s := range live {
		point.Streams = append(point.Streams, StreamSum{Name: s.Name, Messages: s.Messages, Bytes: s.Bytes, FirstSeq: s.FirstSeq, LastSeq: s.LastSeq})
	}
	if r.KeepFor > 0 {
		until := at.Add(time.Duration(r.KeepFor))
		point.KeepUntil = &until
	}
	return k.commitIncremental(ctx, r, point)
}

// awaitCapture waits until the capture of rec reaches at (its mark, in
// the index), and returns its newest chain and how many of its segments
// hold the moment.
func (k *Keeper) awaitCapture(ctx context.Context, rec *CaptureRecord, at time.Time) (*chain, uint64, bool) {
	deadline := time.Now().Add(3*time.Duration(rec.Settings.SegmentEvery) + incrementalWait)
	for {
		var mark captureMark
		data, err := k.index.Get(ctx, captureMarkKey(rec.Module, rec.Local))
		if err == nil && json.Unmarshal(data, &mark) == nil && !mark.At.Before(at) {
			chains, err := k.listChains(ctx, rec.Module, rec.Local)
			if err == nil && len(chains) > 0 {
				ch := chains[len(chains)-1]
				if err := k.readReach(ctx, ch); err == nil {
					if end := k.windowEnd(ctx, rec.Module, rec.Local, chains); !end.Before(at) && !ch.baseTaken.After(at) {
						return ch, uint64(len(ch.listed)), true
					}
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, 0, false
		}
		select {
		case <-ctx.Done():
			return nil, 0, false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// captureHolds reports whether the capture of rec holds every message
// the live streams hold: its mark is its newest chain's, with every
// segment it claimed committed, a round after the last segment closed
// found nothing new (so that segment's deletes are before the mark), and
// that segment reaches each stream's last sequence, of the same stream.
// It returns that chain, its segments and the mark's moment (not after
// now), when the kept data held the messages it holds now.
func (k *Keeper) captureHolds(ctx context.Context, rec *CaptureRecord, live []StreamInfo, now time.Time) (*chain, uint64, time.Time, bool) {
	var mark captureMark
	data, err := k.index.Get(ctx, captureMarkKey(rec.Module, rec.Local))
	if err != nil || json.Unmarshal(data, &mark) != nil || mark.At.After(now) {
		return nil, 0, now, false
	}
	chains, err := k.listChains(ctx, rec.Module, rec.Local)
	if err != nil || len(chains) == 0 {
		return nil, 0, now, false
	}
	ch := chains[len(chains)-1]
	if err := k.readReach(ctx, ch); err != nil {
		return nil, 0, now, false
	}
	if mark.Chain != ch.rel || mark.N != uint64(len(ch.listed)) || !sameStreams(ch, live) || ch.baseTaken.After(mark.At) {
		return nil, 0, now, false
	}
	last := ch.segments[len(ch.segments)-1]
	if mark.At.Before(last.Closed) {
		return nil, 0, now, false
	}
	for _, s := range live {
		ss := last.stream(s.Name)
		if ss.Made != s.Made || ss.To < s.LastSeq {
			return nil, 0, now, false
		}
	}
	return ch, mark.N, mark.At.UTC(), true
}

// sameStreams reports whether the chain's segments follow exactly the
// streams of live.
func sameStreams(ch *chain, live []StreamInfo) bool {
	if len(ch.segments) == 0 {
		return false
	}
	last := ch.segments[len(ch.segments)-1]
	if len(last.Streams) != len(live) {
		return false
	}
	for _, s := range live {
		if last.stream(s.Name) == nil {
			return false
		}
	}
	return true
}

// commitIncremental commits an incremental point: the earlier point of the
// same form and fingerprint set aside (replaced), then point.json (its
// commit mark, its only object), the index, the act.
func (k *Keeper) commitIncremental(ctx context.Context, r Request, point *Point) (*Reply, error) {
	what := pointName(point)
	e := k.prepareReplace(ctx, r, point.Dir)
	defer e.abandon(ctx)
	replaced, err := e.setAside(ctx)
	if err != nil {
		return nil, Errorf(ErrFailed, "setting the earlier point of the same form and fingerprint aside: %v, so the new point was not written and the earlier one stays in place", err)
	}
	var data, ps []byte
	if ps, err = json.Marshal(point.Positions); err == nil {
		data, err = pointJSON(point, ps)
	}
	if err == nil {
		_, err = k.putRecord(ctx, recordKey(point.Dir), data)
	}
	if err != nil {
		err = fmt.Errorf("writing its point.json: %w", err)
		if replaced != nil {
			err = fmt.Errorf("%w; the earlier point is set aside whole as %s in %s", err, replaced.ID, k.abs(replaced.Dir))
		}
		return nil, withKind(ErrFailed, err)
	}
	if replaced != nil && !replaced.Incremental {
		// The earlier point's archive and key indexes, set aside whole,
		// must not stay beside a point that has none.
		for _, key := range []string{archiveKey(point.Dir), point.Dir + "/" + sealedName} {
			if err := k.store.Delete(ctx, key); err != nil {
				k.log.Warn("the replaced point's archive stays beside the incremental point", "object", k.abs(key), "err", err)
			}
		}
		if err := k.dropUnnamedKeyIndexes(ctx, point.Dir, point); err != nil {
			k.log.Warn("a key index of the replaced point stays beside the incremental point", "dir", k.abs(point.Dir), "err", err)
		}
	}
	if err := k.index.Put(ctx, pointKey(r.Module, r.Local, r.Form, r.Fingerprint), pointRecord(point)); err != nil {
		return nil, Errorf(ErrFailed, "restore point %s is complete in %s, but it could not be recorded in the index (%v); "+
			"a keeper restart rebuilds the index from the files", what, k.abs(point.Dir), err)
	}
	said := fmt.Sprintf("Took restore point %s, incremental: the base %s and %d segment(s) of the capture, as the kept data was at %s; no server snapshot was read.",
		what, point.Base, point.Through, point.At.Format(time.RFC3339Nano))
	if replaced != nil {
		said += fmt.Sprintf(" It replaces the earlier point of the same form and fingerprint, which is set aside as %s in %s; only discard-aside removes it.",
			replaced.ID, k.abs(replaced.Dir))
	}
	rep := &Reply{Said: said, Point: point, Aside: replaced, Dir: k.abs(point.Dir), CatchUp: r.CatchUp, Positions: point.Positions}
	k.record(ctx, Act{Verb: VerbSnapshot, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why,
		What: said, Outcome: "done", Detail: pointDetail(rep)})
	k.observe.Snapshotted(r.Module, r.Local, 0, point.Taken)
	return rep, nil
}

// materialize is the point of an incremental point's moment, made from its
// base and segments when it is not made yet.
func (k *Keeper) materialize(ctx context.Context, p *Point) (*Point, error) {
	if p.At == nil || p.Base == "" {
		return nil, errors.New("the incremental point names no moment or base")
	}
	r := Request{Module: p.Module, Local: p.Local, Caller: p.Caller, Why: "the archive of the incremental point " + pointName(p)}
	mp, _, _, err := k.momentPoint(ctx, r, momentAt{at: *p.At, label: p.At.Format(time.RFC3339Nano), base: p.Base})
	if err != nil {
		return nil, fmt.Errorf("making the archive of the incremental point %s from its base and segments: %w", pointName(p), err)
	}
	return mp.Point, nil
}

// restoreIncremental restores an incremental point: the point of its
// moment, made from its base and segments if it is not made yet, restored
// by the usual path.
func (k *Keeper) restoreIncremental(ctx context.Context, r Request, p *Point) (*Reply, error) {
	refused := func(err error) error {
		return fmt.Errorf("%s of %s refused: making the archive of the incremental point %s from its base and segments: %w, so nothing was done",
			VerbRestore, pointName(p), pointName(p), err)
	}
	if p.At == nil || p.Base == "" {
		return nil, refused(errors.New("the incremental point names no moment or base"))
	}
	mr := Request{Module: p.Module, Local: p.Local, Caller: p.Caller, Why: "the archive of the incremental point " + pointName(p)}
	pm, err := k.planMomentOf(ctx, mr, momentAt{at: *p.At, label: p.At.Format(time.RFC3339Nano), base: p.Base})
	if err != nil {
		return nil, refused(err)
	}
	rr := r
	rr.From = ""
	rep, err := k.restoreMoment(ctx, mr, rr, pm)
	var notMade momentNotMade
	if errors.As(err, &notMade) {
		return nil, refused(notMade.err)
	}
	if err != nil {
		return nil, err
	}
	if pm.composed {
		rep.Said = fmt.Sprintf("%s is incremental: its archive was composed from its base and segments, checked as it was composed, composed again as it was restored and written nowhere, and it is not kept.%s %s",
			pointName(p), untrackedSaid(pm.plan), rep.Said)
		return rep, nil
	}
	rep.Said = fmt.Sprintf("%s is incremental: its archive is %s, made from its base and segments.%s %s",
		pointName(p), k.abs(pointRel(p.Module, p.Local, pm.ch.form, pm.fp)), untrackedSaid(pm.plan), rep.Said)
	return rep, nil
}

// incrementalPoint is the incremental point r names, by form and
// fingerprint or by from (an incremental point, or the aside of a replaced
// one), or nil (r names another point or aside). It is read before the
// restore takes the kept data: making its moment's point needs it free.
func (k *Keeper) incrementalPoint(ctx context.Context, r Request) *Point {
	if r.AsideOnly {
		return nil
	}
	if r.From == "" {
		if p := k.indexedPoint(ctx, r.Module, r.Local, r.Form, r.Fingerprint); p != nil && p.Incremental {
			return p
		}
		return nil
	}
	if p, _, err := k.locatePointHead(ctx, r); err == nil && p.Incremental {
		return p
	}
	return nil
}

// captureBase reports whether r takes a capture's base.
func captureBase(r Request) bool {
	return strings.HasPrefix(r.Fingerprint, baseFingerprintPrefix) && r.Caller == captureCaller
}
