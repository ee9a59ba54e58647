package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// A restore-kept reads in this order, each file top to bottom:
//
//   - restore.go: RestoreKept, and restoreLocked, the order of steps: plan,
//     set aside, write the journal, run, then the reply;
//   - restore_plan.go, restore_plan_positions.go: what the restore would do,
//     touching nothing (restore_method.go: each stream's method and why,
//     restore_prefix.go: whether the point is a prefix of the live stream;
//     consumer_config.go: what each consumer set back must be);
//     restore_dryrun.go: a dry run's reply;
//   - restore_aside.go: the live data set aside (restore_delta_aside.go:
//     of a delta stream, only its tail); aside_check.go: verified before it
//     is committed;
//   - restore_begin.go: once the aside is made (restoreAfterAside), the
//     run begun, its journal written first (journal_encode.go: the
//     journal's head as the index holds it);
//   - restore_run.go: the run (restoreRun), which owns the journal and the
//     evidence from there; execute takes its
//     steps, each in its file: restore_remove.go (the live streams
//     removed), restore_giveup.go (or give up and put the aside back),
//     restore_streams.go (the point's streams sent to the bus; an aside's
//     tail sent whole with its base point's messages), restore_delta.go
//     (the delta streams' tails deleted, their configuration set back),
//     restore_positions.go (the consumers set back);
//   - evidence_run.go, evidence_delta.go, evidence_consumers.go: what the
//     run checks as it goes;
//     evidence_write.go: the evidence concluded and written;
//   - restore_reply.go: the reply of a restore that ran to its end;
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
//
// A restore to a moment (at, at-seq; local "*") and a restore of an
// incremental point make the point of their moment (restore_at.go), then
// restore it by this same path; a moment's point is written beside the
// set-aside where the plan is known before it (restore_at_beside.go). A
// moment's point the request wrote was verified as it was written: its
// whole verification is that one, and it is not read whole again beside
// the set-aside.
func (k *Keeper) RestoreKept(ctx context.Context, r Request) (*Reply, error) {
	return k.restore(ctx, r, nil)
}

// restore is RestoreKept; made is the point r names when this request
// made it, verified as it was written (a moment's point), else nil.
func (k *Keeper) restore(ctx context.Context, r Request, made *madePoint) (*Reply, error) {
	if err := CheckRequest(VerbRestore, r); err != nil {
		return nil, err
	}
	var inc *Point // the incremental point r names
	if r.Local != allLocals && r.At == "" && r.AtSeq == nil {
		if inc = k.incrementalPoint(ctx, r); inc == nil {
			return k.restoreKept(ctx, r, made)
		}
	}
	switch {
	case r.Local == allLocals:
		return k.restoreModuleAt(ctx, r)
	case inc != nil:
		return k.restoreIncremental(ctx, r, inc)
	}
	return k.restoreAt(ctx, r)
}

// restoreKept is RestoreKept of a point or an aside.
func (k *Keeper) restoreKept(ctx context.Context, r Request, made *madePoint) (*Reply, error) {
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
	return k.restoreLocked(ctx, r, true, made)
}

// restoreLocked is RestoreKept once the kept data's lock is held; hand says
// whether a person asked for it (recovery also runs it), made is the point
// this request made and verified as it wrote it, or nil. It plans, sets the
// live data aside, writes the journal, and hands the rest to the restore
// run (restore_run.go), which owns the journal and the evidence from then.
func (k *Keeper) restoreLocked(ctx context.Context, r Request, hand bool, made *madePoint) (*Reply, error) {
	act := Act{Verb: VerbRestore, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why, Hand: hand}
	fail := func(err error) (*Reply, error) { return nil, k.restoreFailed(ctx, act, err) }
	began := k.now()
	pl, err := k.planRestore(ctx, r, made)
	if err != nil {
		return fail(fmt.Errorf("restore-kept of %s/%s: %w, so nothing was set aside or removed", r.Module, r.Local, err))
	}
	defer pl.close()
	if pl.logical != nil || logicalSource(pl.point) {
		return k.restoreLogical(ctx, act, r, pl, began) // restore_logical_run.go
	}
	if r.DryRun {
		return k.dryRun(ctx, act, r, pl)
	}
	asideBegan := k.now()
	aside, asideRep, stop, err := k.setAsideFor(ctx, r, pl)
	defer stop()
	if err != nil {
		return fail(err)
	}
	return k.restoreAfterAside(ctx, act, r, pl, aside, asideRep, began, asideBegan)
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
