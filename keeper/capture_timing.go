package keeper

import "time"

// roundTimes is where a capture round's time went, step by step, for the
// debug line of the segment it committed.
type roundTimes struct {
	last  time.Time
	steps []any // name, duration, … as slog attributes
}

func newRoundTimes() *roundTimes { return &roundTimes{last: time.Now()} }

// lap ends the step name: the time since the step before ended.
func (t *roundTimes) lap(name string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.steps = append(t.steps, name, now.Sub(t.last).Round(100*time.Microsecond))
	t.last = now
}
