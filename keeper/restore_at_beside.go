package keeper

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A restore to a moment whose point is not made yet writes that point
// under the kept data's lease, then restores it. Where the plan of its
// restore is known before the point is written, the point is written
// beside the set-aside of the live data, as a full restore verifies its
// point beside it: both read or write a whole archive, and neither needs
// the other. That is so when every live stream of the kept data is
// restored whole (method full, or auto where no live stream can be a
// prefix of the moment: its first sequence is not the moment's), so the
// aside takes every live stream whole, whatever the point holds. A keeper
// that composes moments (Config.ComposeMoments, by default) composes the
// archive instead of writing the point (restore_at_composed.go); the rest
// is the same.
//
// The order of steps holds: the aside's commit mark is written, and so
// anything live removed, only once the point is written, checked as it was
// written and committed, and the restore planned from it sets aside
// exactly the streams the aside took whole. Otherwise the aside is not
// committed and is removed (a point that failed: nothing set aside or
// removed; a plan that differs, as a stream found a prefix after all: the
// restore goes on as if the point had been there, planned and set aside
// anew; where the archive was composed, the point is then written into
// the store, since a delta's aside names it).

// momentNotMade is the error of a moment's point that could not be made:
// nothing was set aside or removed.
type momentNotMade struct{ err error }

func (e momentNotMade) Error() string { return e.err.Error() }
func (e momentNotMade) Unwrap() error { return e.err }

// errAnotherPlan is the plan made from the moment's point, once written,
// setting aside other than the aside taken beside the write.
var errAnotherPlan = errors.New("the restore planned from the point of the moment sets aside other than what was set aside beside it")

// restoreMoment restores the point of the moment pm as rr asks (rr names
// the kept data; its point is set to the moment's): a point made by an
// earlier request is verified beside the set-aside, as any point; one not
// made yet is made now, as r asks, by restoreMomentMade. An error that
// made nothing is a momentNotMade.
func (k *Keeper) restoreMoment(ctx context.Context, r, rr Request, pm *plannedMoment) (*Reply, error) {
	rr.Form, rr.Fingerprint = pm.ch.form, pm.fp
	if p := k.indexedPoint(ctx, rr.Module, rr.Local, pm.ch.form, pm.fp); p != nil {
		return k.restore(ctx, rr, &madePoint{Point: p})
	}
	return k.restoreMomentMade(ctx, r, rr, pm)
}

// restoreMomentMade makes the point of the moment pm under the kept
// data's lease and restores it (rr names it): beside the set-aside where
// the plan allows, else one after the other.
func (k *Keeper) restoreMomentMade(ctx context.Context, r, rr Request, pm *plannedMoment) (*Reply, error) {
	names, _, err := k.candidates(ctx, r.Module, r.Local)
	if err != nil {
		return nil, fmt.Errorf("%s refused: %w, so nothing was done", VerbRestore, err)
	}
	for _, s := range pm.base.Streams {
		if !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
	}
	ctx, release, err := k.lock(ctx, VerbRestore, rr, names...)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := k.unfinished(ctx, VerbRestore, r.Module, r.Local); err != nil {
		return nil, err
	}
	aside, ok, err := k.wholeAside(ctx, rr, pm)
	if err != nil {
		return nil, momentNotMade{err}
	}
	var made *madePoint
	if ok {
		// The point and the aside are written together: the store must
		// have room for both before either begins (for the aside only
		// where the moment is composed, and written nowhere).
		stored, spooled := storedBytes(aside)+momentBytes(pm.base, pm.plan), k.spoolBound(aside)
		if k.compose {
			stored = storedBytes(aside)
		}
		if err := k.checkRoom(ctx, stored, spooled); err != nil {
			return nil, momentNotMade{err}
		}
		var rep *Reply
		rep, made, err = k.restoreMomentBeside(ctx, r, rr, pm, streamNames(aside))
		if !errors.Is(err, errAnotherPlan) {
			return rep, err
		}
		k.log.Info("the restore planned from the point of the moment sets aside other streams or parts than were set aside beside it; that aside was removed, and the restore is planned and set aside again",
			"module", r.Module, "local", r.Local, "point", pointRel(r.Module, r.Local, pm.ch.form, pm.fp))
		if made.composed() {
			// Planned anew, it may roll a stream back by delta, whose aside
			// holds the tail only and names the moment's point for the
			// rest: that point must be stored.
			made.closeComposed()
			made = nil
		}
	}
	if made == nil {
		if made, err = k.writeMomentLocked(ctx, r, pm.ch, pm.base, pm.plan, pm.fp); err != nil {
			return nil, momentNotMade{err}
		}
	}
	return k.restoreLocked(ctx, rr, true, made)
}

// wholeAside gives the streams a restore of the moment pm sets aside
// whole, as the bus holds them now, and whether it is known before the
// point is written: rr restores (not a dry run, not aside-only), some of
// the kept data is live, and every live stream is restored whole (method
// full, or auto where no live stream's first sequence is the moment's).
// The streams are the kept data's live ones and those of the moment's on
// the bus outside them.
func (k *Keeper) wholeAside(ctx context.Context, rr Request, pm *plannedMoment) ([]StreamInfo, bool, error) {
	method := kept.MethodOf(rr)
	if rr.DryRun || rr.AsideOnly || (method != kept.MethodFull && method != kept.MethodAuto) {
		return nil, false, nil
	}
	live, _, err := k.liveStreams(ctx, rr.Module, rr.Local)
	if err != nil || len(live) == 0 {
		return nil, false, err
	}
	var aside []StreamInfo
	taken := func(name string) bool {
		return slices.ContainsFunc(aside, func(s StreamInfo) bool { return s.Name == name })
	}
	for _, s := range live {
		if ms := pm.plan.streams[s.Name]; ms != nil && method == kept.MethodAuto && s.FirstSeq == ms.first {
			return nil, false, nil // it may be a prefix of the moment: delta
		}
		aside = append(aside, s)
	}
	for _, b := range pm.base.Streams {
		if taken(b.Name) {
			continue
		}
		si, err := k.bus.Stream(ctx, b.Name)
		switch {
		case errors.Is(err, ErrNoStream):
		case err != nil:
			return nil, false, Errorf(ErrFailed, "looking up stream %s: %v", b.Name, err)
		default:
			if method == kept.MethodAuto {
				if ms := pm.plan.streams[b.Name]; ms != nil && si.FirstSeq == ms.first {
					return nil, false, nil
				}
			}
			aside = append(aside, *si)
		}
	}
	return aside, true, nil
}

// restoreMomentBeside writes the point of the moment pm while the streams
// aside are set aside whole, plans the restore from the point once it is
// committed, and, when that plan sets aside exactly those streams whole,
// commits the aside and restores the point by the usual path. When the
// plan differs it returns errAnotherPlan, with the point it made and
// nothing set aside or removed.
func (k *Keeper) restoreMomentBeside(ctx context.Context, r, rr Request, pm *plannedMoment, aside []string) (*Reply, *madePoint, error) {
	act := Act{Verb: VerbRestore, Module: rr.Module, Local: rr.Local, Caller: rr.Caller, BusIdentity: rr.BusIdentity, Why: rr.Why, Hand: true}
	began := k.now()
	ctx = WithProgress(ctx, oneAtATime(progressFrom(ctx)))
	wctx, stopWrite := context.WithCancel(ctx)
	actx, stopAside := context.WithCancel(ctx)
	written := make(chan struct{})
	var made *madePoint
	var werr error
	var ownFailure bool // werr is the write's own, not its context ending
	keepMade := false   // made goes back to the caller (errAnotherPlan)
	defer func() {      // after the write ended (the defer below)
		if !keepMade {
			made.closeComposed()
		}
	}()
	go func() {
		defer close(written)
		if k.compose {
			made, werr = k.composeMoment(wctx, r, pm)
		} else {
			made, werr = k.writeMomentLocked(wctx, r, pm.ch, pm.base, pm.plan, pm.fp)
		}
		if werr != nil {
			ownFailure = wctx.Err() == nil
			stopAside() // the point cannot be restored: the aside need not go on
		}
	}()
	defer func() {
		stopWrite()
		<-written
		stopAside()
	}()
	var pl *restorePlan
	var reached bool // the aside is whole and waited for the point
	var planErr error
	pointOK := func() error {
		reached = true
		<-written
		if werr != nil {
			return werr
		}
		p, err := k.planRestore(ctx, rr, made)
		if err != nil {
			planErr = err
			return err
		}
		if p.verifyLater || len(p.delta) > 0 || p.logical != nil || logicalSource(p.point) || !sameNames(p.SetAside, aside) {
			p.close()
			return errAnotherPlan
		}
		pl = p
		return nil
	}
	asideBegan := k.now()
	a, asideRep, err := k.setAsideWith(actx, rr, aside, nil, ReasonRestore, pointRel(r.Module, r.Local, pm.ch.form, pm.fp), pointOK)
	if err != nil {
		if !reached {
			stopWrite() // the aside failed on its own: the write need not go on
		}
		<-written
		switch {
		case werr != nil && (reached || ownFailure):
			return nil, nil, momentNotMade{werr}
		case errors.Is(err, errAnotherPlan):
			keepMade = true
			return nil, made, err
		case planErr != nil:
			return nil, nil, k.restoreFailed(ctx, act, fmt.Errorf("restore-kept of %s/%s: %w, so nothing was set aside or removed", r.Module, r.Local, planErr))
		}
		return nil, nil, k.restoreFailed(ctx, act, fmt.Errorf("restore-kept of %s/%s: setting the live data aside failed: %w, so nothing was removed",
			r.Module, r.Local, withKind(ErrFailed, err)))
	}
	defer pl.close()
	rep, err := k.restoreAfterAside(ctx, act, rr, pl, a, asideRep, began, asideBegan)
	pm.composed = err == nil && made.composed()
	return rep, nil, err
}

// sameNames reports whether a and b hold the same names.
func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
