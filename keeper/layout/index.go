package layout

import "fmt"

// PointKey is a point's record in the index:
// point.<module>.<local>.<form>.<fingerprint>.
func PointKey(module, local string, form int, fingerprint string) string {
	return fmt.Sprintf("point.%s.%s.%d.%s", module, local, form, fingerprint)
}

// PlanKey is a kept data's plan in the index: plan.<module>.<local>.
func PlanKey(module, local string) string { return "plan." + module + "." + local }
