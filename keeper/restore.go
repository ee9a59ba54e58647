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

// A restore-kept reads in this order, each file top to bottom:
//
//   - restore.go: RestoreKept, and restoreLocked, the order of steps: plan,
//     set aside, write the journal, run, then the reply;
//   - restore_plan.go: what the restore would do, touching nothing;
//   - restore_aside.go: the live data set aside, verified and committed;
//   - restore_run.go: the run (restoreRun) that owns the journal and the
//     evidence from there: remove, restore, set the positions back, or give
//     up and put the aside back;
//   - restore_streams.go: a point's streams sent to the bus;
//   - evidence_run.go, evidence_consumers.go: what the run checks as it goes;
//     evidence_write.go: the evidence concluded and written;
//   - journal.go, journal_parts.go: the journal the run saves after every
//     step and closes at its end; journal_recover.go: a run a stopped keeper
//     left, carried on when a keeper starts again.

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
// whether a person asked for it (recovery also runs it). It plans, sets the
// live data aside, writes the journal, and hands the rest to the restore
// run (restore_run.go), which owns the journal and the evidence from then.
func (k *Keeper) restoreLocked(ctx context.Context, r Request, hand bool) (*Reply, error) {
	act := Act{Verb: VerbRestore, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why, Hand: hand}
	fail := func(err error) (*Reply, error) { return nil, k.restoreFailed(ctx, act, err) }
	began := k.now()
	pl, err := k.planRestore(ctx, r)
	if err != nil {
		return fail(fmt.Errorf("restore-kept of %s/%s: %w, so nothing was set aside or removed", r.Module, r.Local, err))
	}
	defer pl.close()
	if r.DryRun {
		return k.dryRun(ctx, act, r, pl)
	}
	asideBegan := k.now()
	aside, asideRep, stop, err := k.setAsideFor(ctx, r, pl)
	defer stop()
	if err != nil {
		return fail(err)
	}
	x, err := k.beginRun(ctx, r, pl, aside, asideRep, began, asideBegan, !hand)
	if err != nil {
		return fail(err)
	}
	set, err := x.execute(ctx)
	if err != nil {
		if x.done() {
			// The streams are restored; only the positions failed. The
			// evidence says which consumers are not where they must be.
			ev, werr := x.finishEvidence(ctx)
			return fail(newEvidenceError(ev, fmt.Errorf("%w.%s", err, x.evidenceSaid(ev, werr))))
		}
		return fail(err)
	}
	defer x.journals.close(ctx, x.j) // after the act below is recorded
	if pl.point != nil {
		k.observe.Restored(r.Module, r.Local, pl.point.ArchiveSize, k.now().UTC())
	}
	rep := k.restoredReply(r, pl, aside, set)
	ev, werr := x.finishEvidence(ctx)
	rep.Evidence = ev
	if ev != nil && ev.Verdict != Pass {
		// Done, and failed: the journal goes, as for any finished restore.
		return fail(x.evidenceFailed(pl, ev, werr))
	}
	rep.Said += x.evidenceSaid(ev, werr)
	return k.done(ctx, act, rep)
}

// restoreFailed records the act of a restore that failed, with its
// evidence when the error carries one, and returns err.
func (k *Keeper) restoreFailed(ctx context.Context, act Act, err error) error {
	act.What, act.Outcome = err.Error(), "failed"
	var ee *EvidenceError
	if errors.As(err, &ee) && ee.Evidence != nil {
		if data, jerr := json.Marshal(map[string]*Evidence{"evidence": ee.Evidence}); jerr == nil && detailFits(data, &struct {
			Evidence *Evidence `json:"evidence"`
		}{}) {
			act.Detail = data
		}
	}
	k.record(ctx, act)
	return err
}

// dryRun replies with the plan and records it; nothing was changed.
func (k *Keeper) dryRun(ctx context.Context, act Act, r Request, pl *restorePlan) (*Reply, error) {
	said := pl.said(r)
	act.What, act.Outcome = said, "planned"
	k.record(ctx, act)
	return &Reply{Said: said, Plan: &pl.RestorePlan, Positions: pl.Reposition, Moves: pl.Moves, CatchUp: catchUp(pl)}, nil
}

// said is the reply of a dry run: what the restore would do.
func (pl *restorePlan) said(r Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Dry run, nothing was changed. restore-kept of %s/%s would ", r.Module, r.Local)
	if len(pl.SetAside) > 0 {
		fmt.Fprintf(&b, "set aside %s (%s) and then remove it", strings.Join(pl.SetAside, ", "), HumanBytes(int64(pl.AsideBytes)))
	} else {
		b.WriteString("set nothing aside (none of the kept data is live)")
	}
	if pl.AsideOnly {
		b.WriteString(", and restore nothing.")
		return b.String()
	}
	fmt.Fprintf(&b, ", restore %s (%s) from %s", strings.Join(pl.Restore, ", "), HumanBytes(int64(pl.RestoreBytes)), pl.Point)
	fmt.Fprintf(&b, ", and set back %d consumer position(s)%s.", len(pl.Moves), movesSaid(pl.Moves))
	if len(pl.Foreign) > 0 {
		fmt.Fprintf(&b, " It would leave alone %d recorded consumer(s) that are not %s's now:%s.", len(pl.Foreign), r.Module, movesSaid(pl.Foreign))
	}
	b.WriteString(pl.unplacedSaid())
	return b.String()
}

// unplacedSaid names the recorded positions that cannot be set back because
// their stream is gone, or is one of the kept data's that the point does not
// carry (the restore removes it).
func (pl *restorePlan) unplacedSaid() string {
	if len(pl.Unplaced) == 0 {
		return ""
	}
	var names []string
	for _, p := range pl.Unplaced {
		names = append(names, p.Consumer+" on "+p.Stream)
	}
	return fmt.Sprintf(" %d recorded position(s) cannot be set back because their stream no longer exists, or is not in the point and so is removed: %s.",
		len(pl.Unplaced), strings.Join(names, ", "))
}

// movesSaid lists moves as ": c on s from 20 to 5, …", or "".
func movesSaid(ms []Move) string {
	var b strings.Builder
	for i, m := range ms {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(m.String())
	}
	return b.String()
}

func catchUp(pl *restorePlan) string {
	if pl.point == nil {
		return ""
	}
	return pl.point.CatchUp
}

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

// beginRun writes the journal of the restore about to run, with its
// evidence so far, and returns the run that carries it on. Nothing was
// removed yet.
func (k *Keeper) beginRun(ctx context.Context, r Request, pl *restorePlan, aside *Aside, asideRep *busarchive.Report, began, asideBegan time.Time, recovered bool) (*restoreRun, error) {
	kind := KindIntoAbsent
	if aside != nil {
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
	j.Evidence = startEvidence(j, pl, aside, asideRep, began, asideBegan, k.now, recovered)
	x := k.newRun(j, asides, pl.point, pl.arch)
	if err := x.journals.save(ctx, j); err != nil {
		if aside != nil {
			return nil, Errorf(ErrFailed, "restore-kept of %s/%s: %w, so nothing was removed; the live data is also set aside as %s in %s",
				r.Module, r.Local, err, aside.ID, k.abs(aside.Dir))
		}
		return nil, Errorf(ErrFailed, "restore-kept of %s/%s: %w, so nothing was restored", r.Module, r.Local, err)
	}
	x.step("journal-written")
	return x, nil
}

// evidenceFailed is the failure of a restore that was done but whose
// evidence fails: the data is left as the restore made it.
func (x *restoreRun) evidenceFailed(pl *restorePlan, ev *Evidence, werr error) error {
	j := x.j
	kept := "none of the kept data was live, so nothing was set aside"
	if j.Aside != "" {
		kept = fmt.Sprintf("the live data as it was stays set aside as %s in %s", j.Aside, x.records.abs(asideRel(j.Aside)))
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
		j.Module, j.Local, what, strings.Join(failed, "; "), kept, x.evidenceSaid(ev, werr)))
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

// source names what the plan restores from, for sentences.
func (pl *restorePlan) source() string {
	if pl.point == nil {
		return "nothing"
	}
	if isAsideRel(pl.pointRel) {
		return sourceName(pl.point)
	}
	return fmt.Sprintf("its restore point f%d-%s", pl.point.Form, pl.point.Fingerprint)
}

// done records the act of a verb that changed the bus. The change is made;
// an act that cannot be recorded is said, not turned into a failure.
func (k *Keeper) done(ctx context.Context, act Act, rep *Reply) (*Reply, error) {
	act.What, act.Outcome = rep.Said, "done"
	if data, err := json.Marshal(rep); err == nil && detailFits(data, rep) {
		act.Detail = data
	} else if rep.Evidence != nil {
		// Too big with its evidence report, which is in the store: the
		// rest of the reply goes without it.
		bare := *rep
		bare.Evidence = nil
		if data, err := json.Marshal(&bare); err == nil && detailFits(data, &bare) {
			act.Detail = data
		}
	}
	if err := k.record(ctx, act); err != nil {
		rep.Said += fmt.Sprintf(" (The act could not be recorded on the bus: %v; it is in the keeper's log.)", err)
	}
	return rep, nil
}
