package keeper

import "context"

// planMethods decides, per stream of the point, the restore method (the
// request's, or auto's pick) and why, into the plan's changes; a delta or
// logical request that cannot be exact or cannot apply is refused here,
// before anything changes. (Being written.)
func (k *Keeper) planMethods(ctx context.Context, r Request, pl *restorePlan) error {
	// STAND-IN (branch around) until the delta helper's lands: a dry run's
	// changes are the diff (as dryRunChanges makes them), then planAround.
	if r.DryRun && pl.point != nil && pl.arch != nil && len(pl.live) > 0 {
		if ds, err := k.diffStreams(ctx, pl.point, pl.arch, dryRunLimit); err == nil {
			pl.changes = changesOf(ds)
		}
	}
	return k.planAround(ctx, r, pl)
}
