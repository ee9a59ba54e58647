package bench

import (
	"strings"
	"time"
)

// verifyTook is the sum of the verification times the keeper logged in
// log (its debug lines `msg="restore point verified" … took=1.2s`): the part
// of a restore-kept spent before the bus is touched.
func verifyTook(log string) time.Duration {
	var total time.Duration
	for line := range strings.Lines(log) {
		if !strings.Contains(line, `msg="restore point verified"`) {
			continue
		}
		_, rest, ok := strings.Cut(line, " took=")
		if !ok {
			continue
		}
		if i := strings.IndexAny(rest, " \n"); i >= 0 {
			rest = rest[:i]
		}
		if d, err := time.ParseDuration(rest); err == nil && d > 0 {
			total += d
		}
	}
	return total
}
