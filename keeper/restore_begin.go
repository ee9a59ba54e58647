package keeper

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// restoreAfterAside is the rest of restoreLocked once the live data the
// plan removes is set aside (aside; nil when none was live): it writes the
// journal and runs the restore, then records the act.
func (k *Keeper) restoreAfterAside(ctx context.Context, act Act, r Request, pl *restorePlan, aside *Aside, asideRep *busarchive.Report, began, asideBegan time.Time) (*Reply, error) {
	fail := func(err error) (*Reply, error) { return nil, k.restoreFailed(ctx, act, err) }
	x, err := k.beginRun(ctx, r, pl, aside, asideRep, began, asideBegan, !act.Hand)
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
		Overrides: pl.Overrides, Expect: pl.expect, Delta: pl.delta, Moment: pl.moment}
	for _, c := range pl.changes {
		j.Bump, j.Expired = addCount(j.Bump, c.Stream, c.BumpedTo), addCount(j.Expired, c.Stream, c.Expired)
	}
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

// addCount is m with stream's n, when n is not 0 (a nil m made).
func addCount(m map[string]uint64, stream string, n uint64) map[string]uint64 {
	if n == 0 {
		return m
	}
	if m == nil {
		m = map[string]uint64{}
	}
	m[stream] = n
	return m
}
