package keeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-keeper/nats-keeper/store"
)

// roomRefused is err, a write of about need bytes that the store refused,
// told as an operator needs it: which store, and the room the write needs,
// when the store said it has no room (store.ErrFull) or refused the write
// itself (store.ErrRefused, which a quota may be behind). Any other error
// is returned as it is.
func (k *Keeper) roomRefused(err error, need int64) error {
	d := k.store.Describe()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrFull):
		return fmt.Errorf("the store %s has no room left for it: it needs about %s there; free some (prune-kept, discard-aside) or %s: %w",
			d.URL, HumanBytes(need), raiseRoom(d.Kind), err)
	case errors.Is(err, store.ErrRefused):
		return fmt.Errorf("the store %s refused the write; if it is out of room (a quota), it needs about %s there; free some (prune-kept, discard-aside) or %s: %w",
			d.URL, HumanBytes(need), raiseRoom(d.Kind), err)
	}
	return err
}

// raiseRoom says how a store of kind gets more room.
func raiseRoom(kind string) string {
	switch kind {
	case "nats":
		return "raise the bucket's max_bytes or the account's JetStream storage limit"
	case "s3":
		return "raise the bucket's quota"
	}
	return "give the keeper a bigger disk"
}

// storeFailure is the first error a store Writer gave, kept so that a
// write that failed inside someone else's code (the bus's snapshot, which
// tells its writer's failure in words of its own) can still be told as the
// store's: full, or refused.
type storeFailure struct {
	store.Writer
	err error
}

func (w *storeFailure) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	w.keep(err)
	return n, err
}

func (w *storeFailure) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.Writer.WriteAt(p, off)
	w.keep(err)
	return n, err
}

func (w *storeFailure) keep(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

// of is err, with the store's full or refused kind added when the store's
// own failure had one that err lost.
func (w *storeFailure) of(err error) error {
	if err == nil || w.err == nil {
		return err
	}
	for _, kind := range []error{store.ErrFull, store.ErrRefused} {
		if errors.Is(w.err, kind) && !errors.Is(err, kind) {
			return fmt.Errorf("%w (%w)", err, kind)
		}
	}
	return err
}

// dropUnplaced removes what a verb that failed wrote under rel (an aside or
// a point that never got its record), before the verb answers, and returns
// err, the verb's failure, saying so when the removal failed too: what is
// left then is logged, and the sweep of leftovers (sweepLeftovers, at a
// start, once it is leftoverAge old) removes it.
func (k *Keeper) dropUnplaced(ctx context.Context, rel string, err error) error {
	rerr := k.removePrefix(context.WithoutCancel(ctx), rel)
	if rerr == nil {
		return err
	}
	k.log.Warn("what a failed verb wrote could not be removed; the sweep of leftovers removes it at a start once it is an hour old",
		"dir", k.abs(rel), "err", rerr)
	return fmt.Errorf("%w; what it wrote in %s could not be removed (%v), so it is left for the keeper's sweep of leftovers, at a start once it is an hour old",
		err, k.abs(rel), rerr)
}
