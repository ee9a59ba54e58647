package keeper

import "context"

// planAround adds to the plan's changes what the restore means around the
// kept data: the streams that mirror or source a restored stream (a full
// restore of one is refused unless the request says downstream "leave"),
// the live consumers that are not the module's, the point's messages the
// stream's limits remove at once, and the last sequence a full restore
// over live data is bumped to. (Being written.)
func (k *Keeper) planAround(ctx context.Context, r Request, pl *restorePlan) error {
	return nil
}
