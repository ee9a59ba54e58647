package jsbus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The bounds of retrying a JetStream request that failed for a reason that
// passes, such as a leader election after a server died.
const (
	// DefaultAttemptTimeout bounds the first try of a request; each try
	// after it may take twice as long as the one before, up to the
	// adapter's request timeout. A stream or the meta group elects a new
	// leader in a few seconds; a request sent to the old one never gets an
	// answer, so waiting long on it would leave the verb waiting for
	// nothing, and a server slow to answer still gets the time it needs.
	DefaultAttemptTimeout = 3 * time.Second
	retryFirstPause       = 100 * time.Millisecond
	retryMaxPause         = 2 * time.Second
	// retryMaxAttempts bounds the loop when the context has no deadline.
	retryMaxAttempts = 40
)

// Error codes of the JetStream API that say the cluster is between leaders.
const (
	codeClusterNotAvail  = 10008 // JetStream system temporarily unavailable
	codeClusterNotLeader = 10009 // JetStream cluster can not handle request
	codeIncomplete       = 10004 // incomplete results
)

// WithAttemptTimeout bounds one try of a request that is tried again when it
// fails for a reason that passes (default DefaultAttemptTimeout).
func WithAttemptTimeout(d time.Duration) Option { return func(o *options) { o.attempt = d } }

// transient reports whether err is a failure that passes by itself while a
// server of the cluster is away or a leader is elected: no responders, a
// request that timed out, no response from the stream, the cluster
// temporarily unavailable or without a leader. Everything else (a missing
// stream, a wrong revision, a bad request) is not, and fails at once.
func transient(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrNoStreamResponse),
		// A request that timed out on its own (nats.go's timeout, not the
		// caller's deadline, which ends the retries).
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case codeClusterNotAvail, codeClusterNotLeader, codeIncomplete:
			return true
		}
	}
	var own *apiError
	if errors.As(err, &own) {
		switch own.ErrCode {
		case codeClusterNotAvail, codeClusterNotLeader, codeIncomplete:
			return true
		}
	}
	return false
}

// retry runs fn until it succeeds, fails for a reason that does not pass,
// or ctx ends, with a pause that doubles from 100 ms to 2 s between tries.
// Each try gets its own deadline (the adapter's attempt timeout, doubled
// each try up to its request timeout, or what is left of ctx), so that a
// request lost with a dead leader leaves time to try again. fn must be
// safe to run again after a try whose answer was lost; what is not (a
// create, an update by revision) checks its own effect (see Create and
// Update). The error of the last try is returned,
// with how many were made when there was more than one.
func (a *Adapter) retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	return a.retryWhen(ctx, what, transient, true, fn)
}

// unheard reports whether err says the request reached no one that acts on
// it: no responders, or a cluster without a leader to take it. A request
// that must not be sent twice (a restore) is tried again only then.
func unheard(err error) bool {
	var api *apiError
	return errors.Is(err, nats.ErrNoResponders) ||
		(errors.As(err, &api) && (api.ErrCode == codeClusterNotAvail || api.ErrCode == codeClusterNotLeader))
}

// retryWhen is retry with its own test of which errors pass; a try that
// ran out of its own time is tried again only when lostToo is set.
func (a *Adapter) retryWhen(ctx context.Context, what string, passes func(error) bool, lostToo bool, fn func(ctx context.Context) error) error {
	pause, tryLimit := retryFirstPause, min(a.cfg.attempt, a.cfg.timeout)
	for attempt := 1; ; attempt++ {
		limit := tryLimit
		tryLimit = min(2*tryLimit, a.cfg.timeout)
		if !lostToo { // a try is cut short only so that it can be made again
			limit = a.cfg.timeout
		}
		actx, cancel := context.WithTimeout(ctx, limit)
		err := fn(actx)
		lost := lostToo && actx.Err() != nil && ctx.Err() == nil // this try's own deadline, not the verb's
		cancel()
		if err == nil || (!passes(err) && !lost) {
			if err != nil && attempt > 1 {
				return fmt.Errorf("%w (after %d tries)", err, attempt)
			}
			return err
		}
		wait := pause/2 + rand.N(pause/2+1)
		if dl, ok := ctx.Deadline(); (ok && time.Until(dl) < wait) || ctx.Err() != nil || attempt == retryMaxAttempts {
			return fmt.Errorf("%w (gave up after %d tries while the bus elected a leader or a server was away)", err, attempt)
		}
		a.log.Info("a JetStream request failed for a reason that passes; trying again", "what", what, "try", attempt, "pause", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up after %d tries: %w)", err, attempt, ctx.Err())
		case <-time.After(wait):
		}
		pause = min(2*pause, retryMaxPause)
	}
}
