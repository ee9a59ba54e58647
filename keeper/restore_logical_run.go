package keeper

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The kind and the step of a logical restore's journal: the live values it
// overwrites are set aside (the journal's Aside), and each stream it has
// written is in Restored. A keeper that starts again finishes it: it finds
// again the keys of the aside that differ from the point, and writes them
// (restore_logical_recover.go).
const (
	KindLogical = "logical"
	StepLogical = "logical"
)

// logicalRun is the run of a logical restore: a restore run (its journal,
// evidence and ports) with what it writes.
type logicalRun struct {
	*restoreRun
	lp *logicalPlan
}

// restoreLogical is restoreLocked for a plan whose method is logical: set
// the live values it overwrites aside (verified), write the journal, write
// the point's value of each key that differs, set the positions on the
// other streams, then the evidence and the reply. began is when the
// restore began.
func (k *Keeper) restoreLogical(ctx context.Context, act Act, r Request, pl *restorePlan, began time.Time) (*Reply, error) {
	fail := func(err error) (*Reply, error) { return nil, k.restoreFailed(ctx, act, err) }
	if pl.logical == nil {
		return fail(Errorf(ErrConflict, "restore-kept of %s/%s: %s holds only the values a logical restore overwrote, so it puts back only with method logical; nothing was changed",
			r.Module, r.Local, pl.source()))
	}
	if r.DryRun {
		return k.logicalDryRun(ctx, act, r, pl)
	}
	asideBegan := k.now()
	aside, asideRep, err := k.setAsideLogical(ctx, r, pl)
	if err != nil {
		return fail(fmt.Errorf("restore-kept of %s/%s: setting the live values aside failed: %w, so nothing was written", r.Module, r.Local, withKind(ErrFailed, err)))
	}
	x, err := k.beginLogical(ctx, r, pl, aside, asideRep, began, asideBegan, !act.Hand)
	if err != nil {
		return fail(err)
	}
	set, err := x.execute(ctx)
	if err != nil {
		return fail(err)
	}
	defer x.journals.close(ctx, x.j)
	rep := k.logicalReply(r, pl, aside, set)
	ev, werr := x.finishEvidence(ctx)
	rep.Evidence = ev
	if ev != nil && ev.Verdict != Pass {
		return fail(x.evidenceFailed(ev, werr))
	}
	rep.Said += x.evidenceSaid(ev, werr)
	return k.done(ctx, act, rep)
}

// logicalDryRun replies with what a logical restore would do; nothing was
// changed.
func (k *Keeper) logicalDryRun(ctx context.Context, act Act, r Request, pl *restorePlan) (*Reply, error) {
	said := fmt.Sprintf("Dry run, nothing was changed. A logical restore of %s/%s from %s would write %s as new revisions (revisions and times new, not the point's; watchers see them), "+
		"remove nothing, set aside the live values it overwrites, and set back %d consumer position(s) on other streams%s.",
		r.Module, r.Local, pl.source(), pl.logical.said(), len(pl.Moves), movesSaid(pl.Moves))
	act.What, act.Outcome = said, "planned"
	k.record(ctx, act)
	return &Reply{Said: said, Plan: &pl.RestorePlan, Positions: pl.Reposition, Moves: pl.Moves, CatchUp: catchUp(pl), Streams: pl.changes}, nil
}

// said is what the plan writes, per stream.
func (lp *logicalPlan) said() string {
	var parts []string
	for _, ls := range lp.streams {
		what := "key(s)"
		if ls.object {
			what = "object(s)"
		}
		parts = append(parts, fmt.Sprintf("%s: %s of %s %s differed", ls.name, grouped(len(ls.keys)), grouped(ls.total), what))
	}
	return strings.Join(parts, ", ")
}
