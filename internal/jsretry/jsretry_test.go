package jsretry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func quick() Policy {
	return Policy{Attempt: 50 * time.Millisecond, Limit: 200 * time.Millisecond, FirstPause: time.Millisecond, MaxPause: 4 * time.Millisecond, Tries: 5}
}

func TestTransient(t *testing.T) {
	for err, want := range map[error]bool{
		nil:                                   false,
		nats.ErrNoResponders:                  true,
		fmt.Errorf("x: %w", nats.ErrTimeout):  true,
		jetstream.ErrNoStreamResponse:         true,
		&jetstream.APIError{ErrorCode: 10008}: true,
		&jetstream.APIError{Code: 503}:        true,
		jetstream.ErrStreamNotFound:           false,
		&jetstream.APIError{ErrorCode: 10071}: false, // wrong last sequence
		errors.New("bad request"):             false,
	} {
		if got := Transient(err); got != want {
			t.Errorf("Transient(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestDoBounds: a step that keeps failing for a reason that passes is tried
// Tries times and the error says so; one that fails for good is tried once;
// a try that runs out of its own time is tried again, with a longer
// deadline, unless the policy is Unheard.
func TestDoBounds(t *testing.T) {
	ctx := context.Background()
	n := 0
	err := quick().Do(ctx, "x", func(context.Context) error { n++; return nats.ErrNoResponders })
	if n != 5 || !errors.Is(err, nats.ErrNoResponders) || !strings.Contains(err.Error(), "gave up after 5 tries") {
		t.Errorf("a step that always passes: %d tries, %v", n, err)
	}
	n = 0
	err = quick().Do(ctx, "x", func(context.Context) error { n++; return jetstream.ErrStreamNotFound })
	if n != 1 || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("a step that fails for good: %d tries, %v", n, err)
	}
	var limits []time.Duration
	err = quick().Do(ctx, "x", func(ctx context.Context) error {
		dl, _ := ctx.Deadline()
		limits = append(limits, time.Until(dl).Round(10*time.Millisecond))
		if len(limits) < 3 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	if err != nil || len(limits) != 3 || limits[1] <= limits[0] {
		t.Errorf("tries cut by their own deadline: %v, deadlines %v (want 3 tries, growing)", err, limits)
	}
	p := quick()
	p.Unheard, p.Passes = true, func(err error) bool { return errors.Is(err, nats.ErrNoResponders) }
	n = 0
	err = p.Do(ctx, "x", func(ctx context.Context) error { n++; <-ctx.Done(); return ctx.Err() })
	if n != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an unheard-only step that ran out of time: %d tries, %v (want 1)", n, err)
	}
}

// TestDoTotal: with Total, tries that each run out of their own time stop
// once Total is spent, though Tries would allow many more, and the last try
// ends at Total, not at its own deadline.
func TestDoTotal(t *testing.T) {
	p := Policy{Attempt: 40 * time.Millisecond, Limit: 80 * time.Millisecond, FirstPause: time.Millisecond,
		MaxPause: 2 * time.Millisecond, Tries: 1000, Total: 300 * time.Millisecond}
	n := 0
	start := time.Now()
	err := p.Do(context.Background(), "x", func(ctx context.Context) error { n++; <-ctx.Done(); return ctx.Err() })
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "gave up after") {
		t.Errorf("a step that always runs out of time: %v", err)
	}
	if n < 3 || n > 8 {
		t.Errorf("%d tries within a total of 300 ms of tries of 40-80 ms each, want 3 to 8", n)
	}
	if took < 300*time.Millisecond {
		t.Errorf("gave up after %v, before the total of 300 ms was spent", took)
	}
}
