package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// DefaultMaxHeavy is how many heavy verbs (snapshot-kept, restore-kept
// other than a dry run, verify-kept) one Service runs at once. Two, not
// more: the server does their work, a core per stream, and on 2 cores
// concurrent snapshots gave 0.80-1.05x the throughput of the same ones in
// sequence, so more at once only adds memory and bytes in flight on the
// keeper's connection; two, not one, so that a short verb runs beside a
// long one instead of being refused for its whole length.
const DefaultMaxHeavy = 2

// DefaultVerbTimeout is the server-side deadline of one verb.
const DefaultVerbTimeout = time.Hour

// RetryAfter is what a heavy verb refused for want of a slot is told to
// wait before it tries again, in its Retry-After header and its sentence.
const RetryAfter = 30 * time.Second

// RetryAfterHeader is the reply header that says, in whole seconds, when a
// refused verb may be tried again.
const RetryAfterHeader = "Retry-After"

// WithMaxHeavy bounds the heavy verbs (snapshot-kept, restore-kept other
// than a dry run, verify-kept) run at once (default DefaultMaxHeavy; less
// than 1: the default). One more is refused at once with a 503, a
// Retry-After header and a sentence; it never waits. Heavy verbs take no
// slot of WithMaxInFlight, so cheap verbs (list-kept, dry runs) never wait
// behind them.
func WithMaxHeavy(n int) ServeOption {
	return serveOption(func(c *serveConfig) { c.maxHeavy = n })
}

// WithVerbTimeout sets the server-side deadline of every verb (default
// DefaultVerbTimeout; 0 or less: the default). A verb past it is cancelled
// and fails saying so; like every failure, it leaves the data whole.
func WithVerbTimeout(d time.Duration) ServeOption {
	return serveOption(func(c *serveConfig) { c.verbTimeout = d })
}

// WithObserver sets a function called once for each request answered: its
// verb, its wire code (200 for success) and the time from its arrival to its
// reply. It must be quick and safe for concurrent use (metrics).
func WithObserver(fn func(verb string, code int, took time.Duration)) ServeOption {
	return serveOption(func(c *serveConfig) { c.observe = fn })
}

// WithStatsData sets a function whose value, for each endpoint (by verb),
// joins in_flight in the endpoint's `data` of $SRV.STATS, as micro's
// Config.StatsHandler does. It must be quick and safe for concurrent use.
func WithStatsData(fn func(verb string) map[string]any) ServeOption {
	return serveOption(func(c *serveConfig) { c.statsData = fn })
}

// heavyVerb reports whether a request to verb is heavy (its Weight in
// the table): it reads or writes a whole archive. A dry run of a verb heavy
// unless dry only plans; a body that does not decode is refused at once by
// run, so it is not heavy either.
func heavyVerb(verb string, body []byte) bool {
	v, _ := kept.LookupVerb(verb)
	if v.Weight != kept.HeavyUnlessDryRun {
		return v.Weight == kept.Heavy
	}
	var r struct {
		DryRun bool `json:"dry-run"`
	}
	if len(body) > MaxBody || json.Unmarshal(body, &r) != nil {
		return false
	}
	return v.Heavy(r.DryRun)
}

// overloaded is the refusal of a heavy verb when every heavy slot is taken:
// a 503 (kept.ErrNoBus for errors.Is) with a Retry-After header.
type overloaded struct {
	said  string
	after time.Duration
}

func (e *overloaded) Error() string { return e.said }
func (e *overloaded) Unwrap() error { return kept.ErrNoBus }

func (s *Service) overloaded(verb string) error {
	return &overloaded{after: RetryAfter, said: fmt.Sprintf("this keeper already runs %d heavy verb(s) (snapshot-kept, restore-kept, verify-kept), "+
		"as many as its --max-heavy allows, so %s was not started and nothing was done; try again in %s",
		cap(s.heavy), verb, RetryAfter)}
}

// retryAfter is the Retry-After header's value for err, or "".
func retryAfter(err error) string {
	var o *overloaded
	if errors.As(err, &o) {
		return strconv.Itoa(int(o.after / time.Second))
	}
	return ""
}

// verbContext is the context a verb runs under: s.base with the verb
// timeout.
func (s *Service) verbContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.verbTimeout, errVerbTimeout)
}

var errVerbTimeout = errors.New("the verb ran past its deadline")

// timedOut rewrites the error of a verb whose deadline passed so that it
// says so; other errors are returned as they are.
func (s *Service) timedOut(ctx context.Context, verb string, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), errVerbTimeout) {
		return err
	}
	return fmt.Errorf("%s ran past the keeper's --verb-timeout of %s and was cancelled: %w", verb, s.verbTimeout, withFailed(err))
}

// withFailed marks err as kept.ErrFailed unless it wraps a sentinel of
// its own.
func withFailed(err error) error {
	for _, k := range []error{kept.ErrBadRequest, kept.ErrNotFound, kept.ErrBusy, kept.ErrConflict, kept.ErrLocked, kept.ErrFailed, kept.ErrNoBus} {
		if errors.Is(err, k) {
			return err
		}
	}
	return &failedError{err: err}
}

// failedError is err, matched by errors.Is to kept.ErrFailed without the
// sentinel's word in its sentence.
type failedError struct{ err error }

func (e *failedError) Error() string   { return e.err.Error() }
func (e *failedError) Unwrap() []error { return []error{e.err, kept.ErrFailed} }
