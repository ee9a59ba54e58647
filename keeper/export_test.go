package keeper

// SetSpoolMemory gives k's snapshot spools a budget of bytes in chunks of
// chunk bytes, so that tests with small data reach the spool's file.
func SetSpoolMemory(k *Keeper, bytes, chunk int) { k.spools = newSpoolBudget(bytes, chunk) }
