package bench

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// The keeper verbs of the big comparisons, each timed by keeperOp on the
// keeper k, in round i (counted from 0, for the error messages).

// snapReq is the request of snapshot-kept of the kept data; restoreReq of
// its restore-kept.
func snapReq() keeper.Request { return keeperRequest(module, local, 1, "bench") }

func restoreReq() keeper.Request {
	q := snapReq()
	q.Why = "benchmark restore"
	return q
}

// which names the keeper in an error: nothing for the file keeper, as before.
func which(k *keeperSvc) string {
	if k.store == StoreFile {
		return ""
	}
	return " (" + k.store + " store)"
}

// snapshotOp times snapshot-kept of the kept data.
func (r *run) snapshotOp(ctx context.Context, k *keeperSvc, name string, i int) (Sample, error) {
	s, rep, err := r.keeperOp(ctx, k, name, func(ctx context.Context) (*keeper.Reply, error) { return k.client.SnapshotKept(ctx, snapReq()) })
	if err != nil {
		return Sample{}, fmt.Errorf("snapshot-kept%s, round %d: %w", which(k), i+1, err)
	}
	if rep.Point != nil && k.store == StoreFile {
		r.res.ArchiveSize = rep.Point.ArchiveSize
	}
	return s, nil
}

// restoreOp deletes the kept data's streams (not timed) and times
// restore-kept into the absent kept data, then checks it is back whole.
func (r *run) restoreOp(ctx context.Context, k *keeperSvc, name string, i int) (Sample, error) {
	if err := r.deleteStreams(ctx, []string{dataStream, kvStream}); err != nil {
		return Sample{}, err
	}
	s, _, err := r.keeperOp(ctx, k, name, func(ctx context.Context) (*keeper.Reply, error) { return k.client.RestoreKept(ctx, restoreReq()) })
	if err != nil {
		return Sample{}, fmt.Errorf("restore-kept%s into an absent kept data, round %d: %w", which(k), i+1, err)
	}
	if err := r.checkRestored(ctx, restoreByKeeper); err != nil {
		return Sample{}, fmt.Errorf("after restore-kept%s, round %d: %w", which(k), i+1, err)
	}
	return s, nil
}

// asideOp times restore-kept with the kept data live (method full: set
// aside, then restored), checks it is back whole, and discards the aside (not timed).
func (r *run) asideOp(ctx context.Context, k *keeperSvc, name string, i int) (Sample, error) {
	s, rep, err := r.keeperOp(ctx, k, name, func(ctx context.Context) (*keeper.Reply, error) { return restoreFull(k)(ctx, restoreReq()) })
	if err != nil {
		return Sample{}, fmt.Errorf("restore-kept%s with the kept data live, round %d: %w", which(k), i+1, err)
	}
	if rep.Aside == nil {
		return Sample{}, fmt.Errorf("restore-kept%s with the kept data live, round %d, set nothing aside: %s", which(k), i+1, rep.Said)
	}
	if err := r.checkRestored(ctx, restoreLive); err != nil {
		return Sample{}, fmt.Errorf("after aside + restore%s, round %d: %w", which(k), i+1, err)
	}
	discard := keeperRequest("", "", 0, "")
	discard.Why = "benchmark: the aside is not needed"
	if _, err := k.client.DiscardAside(ctx, rep.Aside.ID, discard); err != nil {
		return Sample{}, fmt.Errorf("discard-aside %s%s: %w", rep.Aside.ID, which(k), err)
	}
	return s, nil
}
