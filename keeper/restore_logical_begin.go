package keeper

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// beginLogical writes the journal of the logical restore about to run (none
// when no key differs: nothing is written then, and only positions are set
// back), with its evidence so far, and returns its run.
func (k *Keeper) beginLogical(ctx context.Context, r Request, pl *restorePlan, aside *Aside, asideRep *busarchive.Report, began, asideBegan time.Time, recovered bool) (*logicalRun, error) {
	j := &journal{Module: r.Module, Local: r.Local, Kind: KindLogical, Point: pl.pointRel,
		Remove: []string{}, Removed: []string{}, Restore: pl.Restore, Restored: []string{},
		Reposition: pl.Reposition, Step: StepLogical, Caller: r.Caller, Why: r.Why, Started: k.now().UTC(), Expect: pl.expect}
	asides := []*Aside{}
	if aside != nil {
		j.Aside, asides = aside.ID, append(asides, aside)
	}
	j.Evidence = startEvidence(j, pl, aside, asideRep, began, asideBegan, k.now, recovered)
	j.Evidence.SetCheck(logicalPointCheck(pl))
	x := &logicalRun{restoreRun: k.newRun(j, asides, pl.point, pl.arch), lp: pl.logical}
	if aside == nil {
		return x, nil
	}
	if err := x.journals.save(ctx, j); err != nil {
		return nil, Errorf(ErrFailed, "restore-kept of %s/%s: %w, so nothing was written; the live values are also set aside as %s in %s",
			r.Module, r.Local, err, aside.ID, k.abs(aside.Dir))
	}
	x.step("journal-written")
	return x, nil
}

// logicalPointCheck is the point-verified check of a logical restore: each
// stream it writes from was checked against its manifest as it was read,
// before anything was written.
func logicalPointCheck(pl *restorePlan) Check {
	fig := &ArchiveFigures{Size: pl.point.ArchiveSize, Sum: pl.point.ArchiveSum, Streams: len(pl.manifest.Streams),
		BytesChecked: dataBytes(pl.manifest),
		How:          "each stream's data was checked against its manifest's SHA-256 as the logical restore read it, before the live values were set aside and before anything was written"}
	ok := fig.BytesChecked > 0
	return Check{Name: CheckPointVerified, Verdict: verdictOf(ok), Archive: fig,
		Said: fmt.Sprintf("%s: %d bytes checked of an archive of %d bytes%s, %d stream(s); %s",
			verdictOf(ok), fig.BytesChecked, fig.Size, sumSaid(fig.Sum), fig.Streams, fig.How)}
}
