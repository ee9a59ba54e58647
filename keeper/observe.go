package keeper

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Observer hears what a keeper did, for its metrics. The keeper calls it
// after the fact, from the verb's goroutine; its methods must be quick and
// safe for concurrent use. It never changes what a verb does.
type Observer interface {
	// Snapshotted: a restore point of module/local was taken and recorded
	// at at; bytes is its archive's size.
	Snapshotted(module, local string, bytes int64, at time.Time)
	// Restored: module/local was restored from a point (or an aside put
	// back) at at; bytes is the archive read back onto the bus.
	Restored(module, local string, bytes int64, at time.Time)
	// Captured: a capture segment of module/local was closed at at (bytes
	// 0: the capture found nothing new); bytes is its archive's size.
	Captured(module, local string, bytes int64, at time.Time)
}

// ActsBacklog is implemented by an Acts that queues the acts it could not
// record yet (the bus away): how many wait, and how many it dropped because
// its bound was reached. Metrics report both when the keeper's Acts has it.
type ActsBacklog interface {
	ActsQueued() int
	ActsDropped() uint64
}

// nopObserver hears nothing.
type nopObserver struct{}

func (nopObserver) Snapshotted(string, string, int64, time.Time) {}
func (nopObserver) Restored(string, string, int64, time.Time)    {}
func (nopObserver) Captured(string, string, int64, time.Time)    {}

// leaseCount counts the leases this keeper holds in the index.
type leaseCount struct{ n atomic.Int64 }

// LeasesHeld is how many leases (on kept data and on streams) this keeper
// holds in the index now: one set per verb that changes or reads a kept
// data.
func (k *Keeper) LeasesHeld() int { return int(k.leases.n.Load()) }

// OpenJournals is how many restore journals the index holds: restores in
// progress, or interrupted and waiting for a keeper to finish or undo them.
func (k *Keeper) OpenJournals(ctx context.Context) (int, error) {
	keys, err := k.index.Keys(ctx, "journal.")
	if err != nil {
		return 0, fmt.Errorf("listing restore journals in the index: %w", err)
	}
	return len(keys), nil
}

// Acts is the keeper's act recorder, as Config gave it (for metrics, which
// ask it for an ActsBacklog).
func (k *Keeper) Acts() Acts { return k.acts }

// Health checks that the index answers (it reads the index's record of the
// store) and that the store is reachable (it describes the store's identity
// object). Its error says which of the two failed.
func (k *Keeper) Health(ctx context.Context) error {
	if _, err := k.index.Get(ctx, storeKey); err != nil {
		return fmt.Errorf("the index does not answer: %w", err)
	}
	if _, err := k.store.Stat(ctx, storeFile); err != nil {
		return fmt.Errorf("the store %s is not reachable: %w", k.store.Describe().URL, err)
	}
	return nil
}
