package natsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

// tries bounds the attempts at one idempotent step (a part's put, a head's
// put, a purge): a timeout or a missing stream leader is retried five times,
// after 0.25, 1, 2.25, 4 and 4 s, 11.5 s in all: a stream's leader election
// takes a few seconds, more on a loaded machine (4 tries, 3.5 s, were seen
// to fall short on this 2-core machine under load).
const tries = 6

// transient reports whether err may go away if the same step is tried again:
// a timeout, no responders (the stream has no leader for a moment), a
// reconnect in progress, a chunk's acknowledgement that did not come, or
// the server's "temporarily unavailable".
func transient(err error) bool {
	for _, s := range []error{nats.ErrTimeout, context.DeadlineExceeded, nats.ErrNoResponders,
		jetstream.ErrNoStreamResponse, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		jetstream.ErrAsyncPublishTimeout, jetstream.ErrTooManyStalledMsgs} {
		if errors.Is(err, s) {
			return true
		}
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && api.Code == 503
}

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
	return transient(err)
}

// busErr wraps store.ErrUnavailable into err when it means the bus could not
// be reached, so the caller can tell "not there" from "not allowed".
func busErr(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, store.ErrUnavailable)
}

// retry runs step with its own deadline (the store's Timeout, or ctx's if
// sooner) up to tries times while it fails transiently and ctx lives.
func (s *Store) retry(ctx context.Context, what string, step func(context.Context) error) error {
	return s.retryWithin(ctx, what, s.timeout, step)
}

// retryWithin is retry with a deadline d for each try.
func (s *Store) retryWithin(ctx context.Context, what string, d time.Duration, step func(context.Context) error) error {
	var err error
	for try := 1; ; try++ {
		sctx, cancel := context.WithTimeout(ctx, d)
		err = step(sctx)
		cancel()
		if err == nil || ctx.Err() != nil || !transient(err) || try == tries {
			return err
		}
		wait := min(time.Duration(try*try)*250*time.Millisecond, 4*time.Second)
		s.log.Warn("a store step failed; trying it again", "step", what, "try", try, "wait", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
	}
}
