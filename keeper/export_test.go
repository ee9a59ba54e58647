package keeper

import (
	"os"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper/spool"
)

// AutoPicksFull makes k's auto method pick full for every stream, as a
// restore did before the methods: the tests written before them test the
// full method's exact results; restore_delta_test.go tests auto's picks.
func AutoPicksFull(k *Keeper) { k.autoFull = true }

// SetTrackedDeletes bounds the deleted sequences k's captures track per
// stream at n, so that a test reaches the bound.
func SetTrackedDeletes(k *Keeper, n int) { k.trackedDeletes = n }

// SetSpoolMemory gives k's snapshot spools a budget of bytes in chunks of
// chunk bytes, so that tests with small data reach the spool's file; a
// spool at the head then spills at once instead of waiting for its reader
// (headPatience), so a stream whose turn came early spills as surely as
// one that waits.
func SetSpoolMemory(k *Keeper, bytes, chunk int) {
	k.spools = spool.NewBudget(bytes, chunk, 0)
}

// NoFiles fails t for each entry of dir (a spool directory must be left
// empty).
func NoFiles(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("a spool left %s in its directory", e.Name())
	}
}

// RoomMargin is what a snapshot needs free beyond what it writes.
const RoomMargin = DefaultFreeMargin

// SetEvidenceWait shortens the bound on the reads of one evidence check.
func SetEvidenceWait(k *Keeper, d time.Duration) { k.evidenceWait = d }

// SetSettle shortens how long recovery waits for a stream a stopped
// restore left to stop changing (quiet) and for how long at most (bound).
func SetSettle(k *Keeper, quiet, bound time.Duration) { k.waits.quiet, k.waits.bound = quiet, bound }
