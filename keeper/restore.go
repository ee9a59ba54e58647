package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// RestoreKept restores a point beside the live data, or with AsideOnly only
// sets the live data aside; DryRun replies with the plan and changes nothing.
//
// The order: check → locate the point → plan → set the live streams aside
// (snapshot, verify, sync), while the point's whole archive is verified
// beside it → once both passed, record the aside → remove the live streams →
// restore every stream of the point → set back the module's consumers on
// streams the point does not carry → record the act. If restoring fails
// after the live streams were removed, what was half-restored is removed and
// the aside is put back.
func (k *Keeper) RestoreKept(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbRestore, r); err != nil {
		return nil, err
	}
	streams, err := k.streamsOf(ctx, VerbRestore, r)
	if err != nil {
		return nil, fmt.Errorf("%s refused: %w, so nothing was done", VerbRestore, err)
	}
	ctx, release, err := k.lock(ctx, VerbRestore, r, streams...)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := k.unfinished(ctx, VerbRestore, r.Module, r.Local); err != nil {
		return nil, err
	}
	return k.restoreLocked(ctx, r, true)
}

// restoreLocked is RestoreKept once the kept data's lock is held; hand says
// whether a person asked for it (recovery also runs it).
func (k *Keeper) restoreLocked(ctx context.Context, r Request, hand bool) (*Reply, error) {
	act := Act{Verb: VerbRestore, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why, Hand: hand}
	fail := func(err error) (*Reply, error) {
		act.What, act.Outcome = err.Error(), "failed"
		var ee *EvidenceError
		if errors.As(err, &ee) && ee.Evidence != nil {
			if data, jerr := json.Marshal(map[string]*Evidence{"evidence": ee.Evidence}); jerr == nil && len(data) < 64<<10 {
				act.Detail = data
			}
		}
		k.record(ctx, act)
		return nil, err
	}

	began := k.now()
	pl, err := k.planRestore(ctx, r)
	if err != nil {
		return fail(fmt.Errorf("restore-kept of %s/%s: %w, so nothing was set aside or removed", r.Module, r.Local, err))
	}
	defer pl.close()
	if r.DryRun {
		said := pl.said(r)
		act.What, act.Outcome = said, "planned"
		k.record(ctx, act)
		return &Reply{Said: said, Plan: &pl.RestorePlan, Positions: pl.Reposition, Moves: pl.Moves, CatchUp: catchUp(pl)}, nil
	}

	// Set aside: only once this is complete, verified and recorded may any
	// live stream be removed.
	kind := KindIntoAbsent
	var aside *Aside
	var asideRep *busarchive.Report
	asideBegan := k.now()
	if len(pl.SetAside) > 0 {
		asideCtx := ctx
		var pointOK func() error // nil: nothing to wait for
		var beside *besideVerify
		if pl.verifyLater {
			// The point is verified whole while the live data is set aside;
			// the aside counts, and anything live is removed, only once it
			// passed.
			beside = k.verifyBeside(ctx, r, pl)
			defer beside.stop()
			asideCtx, pointOK = beside.aside, beside.wait
		}
		if aside, asideRep, err = k.setAside(asideCtx, r, pl, pointOK); err != nil {
			if beside != nil {
				if verr := beside.failed(); verr != nil {
					return fail(fmt.Errorf("restore-kept of %s/%s: %w, so nothing was set aside or removed", r.Module, r.Local, verr))
				}
			}
			return fail(fmt.Errorf("restore-kept of %s/%s: setting the live data aside failed: %w, so nothing was removed",
				r.Module, r.Local, withKind(ErrFailed, err)))
		}
		kind = KindReplace
		if r.AsideOnly {
			kind = KindAsideOnly
		}
	}
	j := &journal{Module: r.Module, Local: r.Local, Kind: kind, Point: pl.pointRel,
		Remove: pl.Remove, Removed: []string{}, Restore: pl.Restore, Restored: []string{},
		Reposition: pl.Reposition, Step: StepRemove, Caller: r.Caller, Why: r.Why, Started: k.now().UTC(),
		Overrides: pl.Overrides, Expect: pl.expect}
	asides := []*Aside{}
	if aside != nil {
		j.Aside, asides = aside.ID, append(asides, aside)
	} else {
		j.Step = StepRestore // nothing is live, so nothing is removed
	}
	j.Evidence = k.beginEvidence(j, pl, aside, asideRep, began, asideBegan, !hand)
	if err := k.saveJournal(ctx, j); err != nil {
		if aside != nil {
			return fail(Errorf(ErrFailed, "restore-kept of %s/%s: %w, so nothing was removed; the live data is also set aside as %s in %s",
				r.Module, r.Local, err, aside.ID, k.abs(aside.Dir)))
		}
		return fail(Errorf(ErrFailed, "restore-kept of %s/%s: %w, so nothing was restored", r.Module, r.Local, err))
	}
	k.hook("journal-written")

	x := &run{k: k, j: j, asides: asides, point: pl.point, arch: pl.arch, parallel: k.parallel}
	set, err := x.execute(ctx)
	if err != nil {
		if x.done() {
			// The streams are restored; only the positions failed. The
			// evidence says which consumers are not where they must be.
			ev, werr := k.finishEvidence(ctx, j)
			return fail(newEvidenceError(ev, fmt.Errorf("%w.%s", err, k.evidenceSaid(ev, werr))))
		}
		return fail(err)
	}
	defer k.closeJournal(ctx, j) // after the act below is recorded
	if pl.point != nil {
		k.observe.Restored(r.Module, r.Local, pl.point.ArchiveSize, k.now().UTC())
	}
	rep := k.restoredReply(r, pl, aside, set)
	ev, werr := k.finishEvidence(ctx, j)
	rep.Evidence = ev
	if ev != nil && ev.Verdict != Pass {
		// Done, and failed: the journal goes, as for any finished restore.
		return fail(k.evidenceFailed(j, pl, ev, werr))
	}
	rep.Said += k.evidenceSaid(ev, werr)
	return k.done(ctx, act, rep)
}

// beginEvidence is the evidence of a restore about to run: the point's
// verification, and the aside's, made before anything was removed.
func (k *Keeper) beginEvidence(j *journal, pl *restorePlan, aside *Aside, asideRep *busarchive.Report, began, asideBegan time.Time, recovered bool) *Evidence {
	ev := newEvidence(j, began)
	ev.Recovered = recovered
	if pl.point != nil {
		ev.PointSum = pl.point.ArchiveSum
	}
	if pl.verified != nil {
		ev.SetCheck(pointCheck(pl.point, pl.manifest, pl.verified, true))
		ev.Timed("verify", pl.verifyBegan, pl.verifyEnded)
	}
	if aside != nil && asideRep != nil {
		ev.SetCheck(asideCheck(aside, asideRep))
		ev.Timed("aside", asideBegan, k.now())
	}
	return ev
}

// evidenceFailed is the failure of a restore that was done but whose
// evidence fails: the data is left as the restore made it.
func (k *Keeper) evidenceFailed(j *journal, pl *restorePlan, ev *Evidence, werr error) error {
	kept := "none of the kept data was live, so nothing was set aside"
	if j.Aside != "" {
		kept = fmt.Sprintf("the live data as it was stays set aside as %s in %s", j.Aside, k.abs(asideRel(j.Aside)))
	}
	what := fmt.Sprintf("restored %d stream(s) from %s", len(pl.Restore), pl.source())
	if j.kind() == KindAsideOnly {
		what = "set the live data aside and removed it"
	}
	var failed []string
	for _, c := range ev.Checks {
		if c.Verdict != Pass {
			failed = append(failed, c.Name+" ("+c.Said+")")
		}
	}
	return newEvidenceError(ev, Errorf(ErrFailed, "restore-kept of %s/%s %s, but its evidence fails: %s; so it is reported as failed. "+
		"The restored data is left as it is (a restore is not undone because of its evidence), and %s.%s",
		j.Module, j.Local, what, strings.Join(failed, "; "), kept, k.evidenceSaid(ev, werr)))
}

// restoredReply is the reply of a restore that ran to its end.
func (k *Keeper) restoredReply(r Request, pl *restorePlan, aside *Aside, set []Position) *Reply {
	if aside == nil {
		said := fmt.Sprintf("Restored %s/%s from %s: %d stream(s) restored, %d consumer position(s) set back%s; "+
			"nothing was set aside because none of the kept data was live.",
			r.Module, r.Local, pl.source(), len(pl.Restore), len(pl.Moves), movesSaid(pl.Moves))
		said += pl.unplacedSaid() + pl.overridesSaid()
		if c := catchUp(pl); c != "" {
			said += fmt.Sprintf(" The data is at form %d: run %s next.", pl.point.Form, c)
		}
		return &Reply{Said: said, Point: pl.point, CatchUp: catchUp(pl), Positions: set, Moves: pl.Moves}
	}
	asideDir := k.abs(aside.Dir)
	if r.AsideOnly {
		said := fmt.Sprintf("Set aside %s/%s as %s in %s (%s, %s) and removed it from the bus; nothing was restored.",
			r.Module, r.Local, aside.ID, asideDir, strings.Join(pl.SetAside, ", "), HumanBytes(aside.ArchiveSize))
		return &Reply{Said: said, Aside: aside, Dir: asideDir}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Restored %s/%s from %s: %d stream(s) restored, %d consumer position(s) set back%s",
		r.Module, r.Local, pl.source(), len(pl.Restore), len(pl.Moves), movesSaid(pl.Moves))
	fmt.Fprintf(&b, "; the live data as it was is set aside as %s in %s.", aside.ID, asideDir)
	b.WriteString(pl.unplacedSaid() + pl.overridesSaid())
	if c := catchUp(pl); c != "" {
		fmt.Fprintf(&b, " The data is at form %d: run %s next.", pl.point.Form, c)
	}
	return &Reply{Said: b.String(), Point: pl.point, Aside: aside, Dir: asideDir,
		CatchUp: catchUp(pl), Positions: set, Moves: pl.Moves}
}

// setPositions sets back the module's consumers on streams the point does
// not carry.
func (k *Keeper) setPositions(ctx context.Context, module, local string, p *Point, ps []Position, a *Aside) ([]Position, error) {
	if p == nil {
		return []Position{}, nil // aside-only: nothing is set back
	}
	set := []Position{}
	for _, pos := range ps {
		if err := k.bus.SetPosition(ctx, pos); err != nil {
			keptAt := "nothing was set aside because none of it was live"
			if a != nil {
				keptAt = fmt.Sprintf("the live data as it was is set aside as %s in %s", a.ID, k.abs(a.Dir))
			}
			return set, Errorf(ErrFailed, "restore-kept of %s/%s restored every stream of %s, but setting consumer %s on %s "+
				"back to sequence %d failed (%v), after %d of %d position(s) were set; %s",
				module, local, sourceName(p), pos.Consumer, pos.Stream, pos.AckFloor, err, len(set), len(ps), keptAt)
		}
		set = append(set, pos)
	}
	return set, nil
}

func catchUp(pl *restorePlan) string {
	if pl.point == nil {
		return ""
	}
	return pl.point.CatchUp
}

// done records the act of a verb that changed the bus. The change is made;
// an act that cannot be recorded is said, not turned into a failure.
func (k *Keeper) done(ctx context.Context, act Act, rep *Reply) (*Reply, error) {
	act.What, act.Outcome = rep.Said, "done"
	if data, err := json.Marshal(rep); err == nil && len(data) < 64<<10 {
		act.Detail = data
	} else if rep.Evidence != nil {
		// Too big with its evidence report, which is in the store: the
		// rest of the reply goes without it.
		bare := *rep
		bare.Evidence = nil
		if data, err := json.Marshal(&bare); err == nil && len(data) < 64<<10 {
			act.Detail = data
		}
	}
	if err := k.record(ctx, act); err != nil {
		rep.Said += fmt.Sprintf(" (The act could not be recorded on the bus: %v; it is in the keeper's log.)", err)
	}
	return rep, nil
}

// putBack undoes a restore that failed after live streams may have been
// removed: it deletes the streams this call began restoring (here), then
// brings back from the restore's aside (asides[0]) every one of its streams
// that is not on the bus as the aside holds it. A stream in the way goes
// only if an aside holds it as it stands (removeCovered); otherwise it stays
// and the kept data is not whole yet. It asks the bus rather than trusting
// what the keeper believes it removed: a delete whose reply was lost may
// have happened. It returns a sentence that says both outcomes, and whether
// the kept data is whole on the bus again.
func (k *Keeper) putBack(ctx context.Context, asides []*Aside, here []string) (string, bool) {
	var notes []string
	var stuck []string
	for _, s := range here {
		if err := k.bus.DeleteStream(ctx, s); err != nil && !errors.Is(err, ErrNoStream) {
			stuck = append(stuck, fmt.Sprintf("%s (%v)", s, err))
		}
	}
	if len(here) > 0 {
		if len(stuck) == 0 {
			notes = append(notes, fmt.Sprintf("the half-restored stream(s) %s were removed", strings.Join(here, ", ")))
		} else {
			notes = append(notes, "the half-restored stream(s) "+strings.Join(stuck, ", ")+" could not be removed")
		}
	}
	if len(asides) == 0 {
		return strings.Join(notes, "; "), len(stuck) == 0
	}
	aside := asides[0]
	if len(stuck) > 0 {
		notes = append(notes, fmt.Sprintf("so the live data was not put back yet; it is complete in aside %s in %s",
			aside.ID, k.abs(aside.Dir)))
		return strings.Join(notes, "; "), false
	}
	var missing []string
	for _, st := range aside.Streams {
		si, err := k.bus.Stream(ctx, st.Name)
		switch {
		case errors.Is(err, ErrNoStream):
			missing = append(missing, st.Name)
			continue
		case err != nil:
			notes = append(notes, fmt.Sprintf("whether stream %s is on the bus could not be told (%v), so the live data was not put back yet; it is complete in aside %s in %s",
				st.Name, err, aside.ID, k.abs(aside.Dir)))
			return strings.Join(notes, "; "), false
		}
		if sameState(st, si) {
			continue // never removed
		}
		if err := k.removeCovered(ctx, asides[1:], st.Name); err != nil {
			notes = append(notes, fmt.Sprintf("%v, so the live data was not put back yet; it is complete in aside %s in %s",
				err, aside.ID, k.abs(aside.Dir)))
			return strings.Join(notes, "; "), false
		}
		missing = append(missing, st.Name)
	}
	if len(missing) == 0 {
		notes = append(notes, "no live stream had been removed")
		notes = append(notes, fmt.Sprintf("the aside %s in %s stays as a copy", aside.ID, k.abs(aside.Dir)))
		return strings.Join(notes, "; "), true
	}
	a, err := k.openArchive(ctx, aside.Dir, asidePoint(aside))
	if err == nil {
		_, err = k.restoreArchive(ctx, a, missing, k.parallel, nil, // an aside goes back as it was
			Progress{Verb: VerbRestore, Module: aside.Module, Local: aside.Local, Step: "put back"}, nil)
		a.Close()
	}
	if err != nil {
		notes = append(notes, fmt.Sprintf("putting the live data back from aside %s failed too (%v); it is complete in %s",
			aside.ID, err, k.abs(aside.Dir)))
		return strings.Join(notes, "; "), false
	}
	notes = append(notes, fmt.Sprintf("the live data was put back from aside %s (%s), which stays in %s",
		aside.ID, strings.Join(missing, ", "), k.abs(aside.Dir)))
	return strings.Join(notes, "; "), true
}
