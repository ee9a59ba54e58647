package keeper

import (
	"context"
	"sync"
)

// besideVerify is the point's whole verification running beside the
// set-aside of the live data, in a rollback: both read or write a whole
// archive, and neither needs the other, so they overlap. The order of
// steps holds: the aside's commit mark is written, and so anything live
// removed, only once the verification passed (wait). A point that fails
// stops the set-aside, which then leaves nothing (no commit mark): nothing
// is set aside or removed.
type besideVerify struct {
	done   chan struct{}
	err    error              // why the point is not verified (nil: it passed); read after done
	own    bool               // err is the verification's own failure, not its context ending
	cancel context.CancelFunc // stops the verification
	// aside is the set-aside's context: it ends when the verification
	// fails, since the point cannot be restored.
	aside     context.Context
	stopAside context.CancelFunc
}

// verifyBeside begins verifying pl's point whole; the set-aside runs in
// b.aside meanwhile. Their progress reports are made one at a time. Call
// stop when done with it.
func (k *Keeper) verifyBeside(ctx context.Context, r Request, pl *restorePlan) *besideVerify {
	ctx = WithProgress(ctx, oneAtATime(progressFrom(ctx)))
	vctx, cancel := context.WithCancel(ctx)
	actx, stopAside := context.WithCancel(ctx)
	b := &besideVerify{done: make(chan struct{}), cancel: cancel, aside: actx, stopAside: stopAside}
	go func() {
		defer close(b.done)
		if err := k.verifyPoint(vctx, r, pl); err != nil {
			b.err, b.own = err, vctx.Err() == nil
			stopAside()
		}
	}()
	return b
}

// wait waits for the verification and returns nil only when the point
// passed: a verification its context stopped did not pass either.
func (b *besideVerify) wait() error {
	<-b.done
	return b.err
}

// failed stops the verification if it still runs and returns its own
// failure, or nil when it passed or was stopped before it could tell.
func (b *besideVerify) failed() error {
	b.cancel()
	<-b.done
	if b.own {
		return b.err
	}
	return nil
}

// stop ends the verification and the set-aside's context; safe twice.
func (b *besideVerify) stop() {
	b.cancel()
	<-b.done
	b.stopAside()
}

// oneAtATime makes fn's calls one at a time.
func oneAtATime(fn func(Progress)) func(Progress) {
	var mu sync.Mutex
	return func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		fn(p)
	}
}
