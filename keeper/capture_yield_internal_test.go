package keeper

import (
	"testing"
	"time"
)

// A capture behind its streams rests after a cut round for three times the time
// the round lost against the fastest cut rounds of this window and the one
// before, never longer than segment-every; a round as fast as those rests
// not at all, and the fastest of a window is forgotten two windows on.
func TestYieldRestsWhatTheBusTookFromTheRound(t *testing.T) {
	const mib = 1 << 20
	every := time.Second
	var y yielder
	if got := y.rest(80*time.Millisecond, 8*mib, every); got != 0 {
		t.Fatalf("the first cut round rests %v, want 0 (nothing to compare it with)", got)
	}
	if got := y.rest(80*time.Millisecond, 8*mib, every); got != 0 {
		t.Fatalf("a round as fast as the fastest rests %v, want 0", got)
	}
	if got := y.rest(200*time.Millisecond, 8*mib, every); got != 360*time.Millisecond {
		t.Fatalf("a round 120ms slower rests %v, want 360ms", got)
	}
	if got := y.rest(100*time.Millisecond, 4*mib, every); got != 180*time.Millisecond {
		t.Fatalf("half the bytes in 100ms (60ms lost) rests %v, want 180ms", got)
	}
	if got := y.rest(900*time.Millisecond, 8*mib, every); got != every {
		t.Fatalf("a round 820ms slower rests %v, want segment-every, %v", got, every)
	}
	if got := y.rest(0, 8*mib, every); got != 0 {
		t.Fatalf("a round of no time rests %v", got)
	}
	if got := y.rest(time.Second, 0, every); got != 0 {
		t.Fatalf("a round of no bytes rests %v", got)
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
