package keeper

import "context"

// planLogical plans a logical restore (another engineer's; this stand-in
// goes when theirs lands): refused until then, before anything changes.
func (k *Keeper) planLogical(ctx context.Context, r Request, pl *restorePlan) error {
	return Errorf(ErrBadRequest, "method logical is not implemented yet")
}
