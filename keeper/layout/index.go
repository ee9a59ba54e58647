package layout

// PlanKey is a kept data's plan in the index: plan.<module>.<local>. A
// point's index key is the contract's (kept.PointKey): list-kept's cursors
// carry it.
func PlanKey(module, local string) string { return "plan." + module + "." + local }
