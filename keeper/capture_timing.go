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

// A capture that is behind its streams (its segments cut at their bytes)
// goes on at once, and on a busy bus its reads then take the time the
// writers would have had: the server delivers each message to it as it
// stores the writers' next. So after a cut round it rests for the time the
// round lost to that other work (its time beyond what its bytes took in the
// fastest cut rounds seen lately: yieldWindow of them, and the window
// before) times how many times slower than those it was, at most
// yieldMost segment-everys. A round the bus slowed a little rests a
// little (under a writer of 20 MB/s, a round of 90 ms against 60 rests 45
// ms); behind a burst of writes (350 ms against 65) it rests a second and
// a half, and reads about a fifth of what it read without resting; on a
// bus with room a round loses nothing, and a capture behind catches up at
// full speed.
const (
	yieldWindow = 64
	yieldMost   = 3
)

// yielder is where a capture keeps the fastest time a byte of a cut
// round took: in this window of cut rounds and in the one before.
type yielder struct {
	best, before float64 // nanoseconds a byte; 0: none yet
	rounds       int
}

// rest is how long to rest after a cut round that read n bytes in took,
// at most yieldMost times every.
func (y *yielder) rest(took time.Duration, n uint64, every time.Duration) time.Duration {
	if n == 0 || took <= 0 {
		return 0
	}
	per := float64(took) / float64(n)
	if y.best == 0 || per < y.best {
		y.best = per
	}
	fastest := y.best
	if y.before > 0 && y.before < fastest {
		fastest = y.before
	}
	if y.rounds++; y.rounds == yieldWindow {
		y.before, y.best, y.rounds = y.best, 0, 0
	}
	lost := took - time.Duration(fastest*float64(n))
	if lost <= 0 {
		return 0
	}
	slower := per / fastest
	return min(time.Duration(float64(lost)*slower), yieldMost*every)
}
