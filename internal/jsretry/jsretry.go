// Package jsretry is how nats-keeper's NATS adapters (the bus adapter jsbus
// and the object-store backend natsstore) ride out a JetStream cluster
// between leaders: which errors pass by themselves, how a step is tried
// again, and how many replicas the keeper's own streams get. One rule for
// both, so the index, the acts stream and the store's bucket behave alike
// when a server dies.
//
// It imports nats.go only, and no package of this module.
package jsretry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Error codes of the JetStream API that say the cluster is between leaders.
const (
	CodeClusterNotAvail  = 10008 // JetStream system temporarily unavailable
	CodeClusterNotLeader = 10009 // JetStream cluster can not handle request
	CodeIncomplete       = 10004 // incomplete results
)

// Transient reports whether err is a failure that passes by itself while a
// server of the cluster is away or a leader is elected: no responders, a
// request that timed out (nats.go's own timeout, or a try's deadline), no
// response from the stream, a reconnect in progress, a publish whose
// acknowledgement did not come, the cluster temporarily unavailable or
// without a leader (10008, 10009, 10004, or any 503). Everything else (a
// missing stream, a wrong revision, a bad request) does not pass.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	for _, s := range []error{nats.ErrNoResponders, jetstream.ErrNoStreamResponse, nats.ErrNoStreamResponse,
		nats.ErrTimeout, context.DeadlineExceeded, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		jetstream.ErrAsyncPublishTimeout, jetstream.ErrTooManyStalledMsgs} {
		if errors.Is(err, s) {
			return true
		}
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.Code == 503 || BetweenLeaders(int(api.ErrorCode)))
}

// BetweenLeaders reports whether a JetStream API error code says the
// cluster has no leader to take the request for now.
func BetweenLeaders(code int) bool {
	return code == CodeClusterNotAvail || code == CodeClusterNotLeader || code == CodeIncomplete
}

// Policy is how a step is tried again.
type Policy struct {
	// Attempt bounds the first try; each try after it may take twice as
	// long as the one before, up to Limit. A request sent to a leader that
	// died never gets an answer, so a short first try leaves time to try
	// again, and a slow server still gets the time it needs.
	Attempt, Limit time.Duration
	// FirstPause is the pause after the first failed try; each pause
	// doubles, up to MaxPause, with jitter of up to half of it.
	FirstPause, MaxPause time.Duration
	// Tries bounds the tries whatever the context's deadline (at least 1).
	Tries int
	// Total, when set, bounds the time of all tries and pauses together
	// whatever the context's deadline: no try begins or lasts past it.
	// Tries alone allow a long time once every try gets Limit.
	Total time.Duration
	// Passes says which errors are tried again (nil: Transient).
	Passes func(error) bool
	// Unheard, when set, tries a step again only when Passes says so and
	// never after a try that ran out of its own time: for a request that
	// must not be sent twice once heard (a restore). Each try then gets
	// Limit.
	Unheard bool
	Log     *slog.Logger
}

// Do runs step until it succeeds, fails for a reason that does not pass,
// runs out of tries, or ctx ends. step must be safe to run again after a
// try whose answer was lost; what is not (a create, an update by revision)
// checks its own effect. The error of the last try is returned, with how
// many were made when there was more than one.
func (p Policy) Do(ctx context.Context, what string, step func(ctx context.Context) error) error {
	passes := p.Passes
	if passes == nil {
		passes = Transient
	}
	pause, limit := p.FirstPause, min(p.Attempt, p.Limit)
	if p.Total > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Total)
		defer cancel()
	}
	for try := 1; ; try++ {
		this := limit
		limit = min(2*limit, p.Limit)
		if p.Unheard {
			this = p.Limit
		}
		tctx, cancel := context.WithTimeout(ctx, this)
		err := step(tctx)
		lost := !p.Unheard && tctx.Err() != nil && ctx.Err() == nil // this try's own deadline, not the caller's
		cancel()
		if err == nil || (!passes(err) && !lost) {
			if err != nil && try > 1 {
				return fmt.Errorf("%w (after %d tries)", err, try)
			}
			return err
		}
		wait := pause/2 + rand.N(pause/2+1)
		if dl, ok := ctx.Deadline(); (ok && time.Until(dl) < wait) || ctx.Err() != nil || try >= p.Tries {
			return fmt.Errorf("%w (gave up after %d tries while the bus elected a leader or a server was away)", err, try)
		}
		if p.Log != nil {
			p.Log.Info("a JetStream request failed for a reason that passes; trying again", "what", what, "try", try, "pause", wait, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up after %d tries: %w)", err, try, ctx.Err())
		case <-time.After(wait):
		}
		pause = min(2*pause, p.MaxPause)
	}
}
