package jsbus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/jsretry"
)

// The bounds of retrying a JetStream request that failed for a reason that
// passes, such as a leader election after a server died (see jsretry).
const (
	// DefaultAttemptTimeout bounds the first try of a request; each try
	// after it may take twice as long as the one before, up to the
	// adapter's request timeout. A stream or the meta group elects a new
	// leader in a few seconds; a request sent to the old one never gets an
	// answer, so waiting long on it would leave the verb waiting for
	// nothing, and a server slow to answer still gets the time it needs.
	DefaultAttemptTimeout = 3 * time.Second
	// retryMaxAttempts bounds the loop when the context has no deadline.
	retryMaxAttempts = 40
	// retryTotal bounds the tries and pauses of one request together: 40
	// tries of up to the request timeout each (30 s) would let one request
	// of a verb wait some 20 minutes for a bus that is gone. A leader is
	// elected within seconds and a restarted server is back within a few
	// minutes; past that the verb fails and says what it did not do.
	retryTotal = 5 * time.Minute
)

// WithAttemptTimeout bounds one try of a request that is tried again when it
// fails for a reason that passes (default DefaultAttemptTimeout).
func WithAttemptTimeout(d time.Duration) Option { return func(o *options) { o.attempt = d } }

// transient is jsretry.Transient, and the same codes in the answers the
// adapter decodes itself (apiError).
func transient(err error) bool {
	var own *apiError
	return jsretry.Transient(err) || (errors.As(err, &own) && jsretry.BetweenLeaders(int(own.ErrCode)))
}

// policy is how the adapter tries a request again: pauses from 100 ms to
// 2 s, each try its own deadline (the attempt timeout, doubled each try up
// to the request timeout, or what is left of ctx), until ctx's deadline or
// retryTotal, whichever comes first.
func (a *Adapter) policy() jsretry.Policy {
	return jsretry.Policy{Attempt: a.cfg.attempt, Limit: a.cfg.timeout, FirstPause: 100 * time.Millisecond,
		MaxPause: 2 * time.Second, Tries: retryMaxAttempts, Total: max(retryTotal, 2*a.cfg.timeout), Passes: transient, Log: a.log}
}

// retry runs fn until it succeeds, fails for a reason that does not pass,
// or ctx ends (jsretry.Policy.Do). fn must be safe to run again after a try
// whose answer was lost; what is not (a create, an update by revision)
// checks its own effect (see Create and Update).
func (a *Adapter) retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	return a.policy().Do(ctx, what, fn)
}

// unheard reports whether err says the request reached no one that acts on
// it: no responders, or a cluster without a leader to take it. A request
// that must not be sent twice (a restore) is tried again only then.
func unheard(err error) bool {
	var api *apiError
	return errors.Is(err, nats.ErrNoResponders) ||
		(errors.As(err, &api) && (api.ErrCode == jsretry.CodeClusterNotAvail || api.ErrCode == jsretry.CodeClusterNotLeader))
}

// retryUnheard is retry for a request that must not be sent twice once
// heard: it is tried again only while unheard, each try with the whole
// request timeout.
func (a *Adapter) retryUnheard(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	p := a.policy()
	p.Passes, p.Unheard = unheard, true
	return p.Do(ctx, what, fn)
}
