package keeper

import (
	"testing"
	"time"
)

// A capture behind its streams rests after a cut round for the time the
// round lost against the fastest cut rounds of this window and the one
// before, times how many times slower it was, never longer than three
// segment-everys; a round as fast as those rests not at all, and the
// fastest of a window is forgotten two windows on.
func TestYieldRestsWhatTheBusTookFromTheRound(t *testing.T) {
	const mib = 1 << 20
	every := time.Second
	var y yielder
	for _, tc := range []struct {
		took time.Duration
		n    uint64
		want time.Duration
		why  string
	}{
		{80 * time.Millisecond, 8 * mib, 0, "the first cut round (nothing to compare it with)"},
		{80 * time.Millisecond, 8 * mib, 0, "a round as fast as the fastest"},
		{120 * time.Millisecond, 8 * mib, 60 * time.Millisecond, "a round 1.5 times slower, 40ms lost"},
		{320 * time.Millisecond, 8 * mib, 960 * time.Millisecond, "a round 4 times slower, 240ms lost"},
		{80 * time.Millisecond, 4 * mib, 80 * time.Millisecond, "half the bytes in 80ms: twice slower, 40ms lost"},
		{800 * time.Millisecond, 8 * mib, 3 * every, "a round 10 times slower: three segment-everys at most"},
		{0, 8 * mib, 0, "a round of no time"},
		{time.Second, 0, 0, "a round of no bytes"},
	} {
		if got := y.rest(tc.took, tc.n, every); got != tc.want {
			t.Fatalf("%s: rests %v, want %v", tc.why, got, tc.want)
		}
	}

	// The bus gets slower for good: two windows on, its new pace is the
	// fastest, and rounds at it rest no more.
	slow := 400 * time.Millisecond
	for range 2 * yieldWindow {
		y.rest(slow, 8*mib, every)
	}
	if got := y.rest(slow, 8*mib, every); got != 0 {
		t.Fatalf("two windows at %v, a round at it still rests %v", slow, got)
	}
}
