package keeper

import (
	"context"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

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
		Overrides: pl.Overrides, Expect: pl.expect, Delta: pl.delta}
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
