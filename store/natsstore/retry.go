package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jsretry"
	"github.com/nats-keeper/nats-keeper/store"
)

// tries bounds the attempts at one idempotent step (a part's put, a head's
// put, a purge): one that fails for a reason that passes (jsretry.Transient)
// is tried again after pauses of about 0.25, 0.5, 1, 2, 4 and 4 s, 11.75 s
// in all: a stream's leader election takes a few seconds, more on a loaded
// machine (3.5 s of retries were seen to fall short on a 2-core machine
// under load).
const tries = 7

// unreachable reports whether err means the bus could not be reached or
// refused the connection's credentials.
func unreachable(err error) bool {
	for _, s := range []error{nats.ErrConnectionClosed, nats.ErrNoServers, nats.ErrConnectionDraining,
		nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrPermissionViolation,
		jetstream.ErrJetStreamNotEnabled, jetstream.ErrJetStreamNotEnabledForAccount} {
		if errors.Is(err, s) {
			return true
		}
	}
	return jsretry.Transient(err)
}

// busErr wraps store.ErrUnavailable into err when it means the bus could not
// be reached, so the caller can tell "not there" from "not allowed", and
// store.ErrFull when the server refused it for want of room (which trying
// again does not change: a full bucket is never tried again).
func busErr(err error) error {
	if isFull(err) && !errors.Is(err, store.ErrFull) {
		return fmt.Errorf("%w (%w)", err, store.ErrFull)
	}
	if err == nil || isFull(err) || errors.Is(err, store.ErrUnavailable) || !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, store.ErrUnavailable)
}

// policy is how the store tries a step again, each try with deadline d.
func (s *Store) policy(d time.Duration) jsretry.Policy {
	return jsretry.Policy{Attempt: d, Limit: d, FirstPause: 250 * time.Millisecond, MaxPause: 4 * time.Second, Tries: tries, Log: s.log,
		Passes: func(err error) bool { return !isFull(err) && (errors.Is(err, errOutOfOrder) || jsretry.Transient(err)) }}
}

// retry runs step with its own deadline (the store's Timeout, or ctx's if
// sooner) up to tries times while it fails for a reason that passes and
// ctx lives.
func (s *Store) retry(ctx context.Context, what string, step func(context.Context) error) error {
	return s.retryWithin(ctx, what, s.timeout, step)
}

// retryWithin is retry with a deadline d for each try.
func (s *Store) retryWithin(ctx context.Context, what string, d time.Duration, step func(context.Context) error) error {
	return s.policy(d).Do(ctx, what, step)
}
