package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// diskStore is the free space and whether a path shares its disk that
// the store in front of a keeper's (room) tells.
type diskStore struct {
	room   *fault.Room
	free   int64
	shares bool
}

// newDiskStore puts a store that tells free and shares in front of c's.
func newDiskStore(c *keeper.Config, free int64, shares bool) *diskStore {
	s := &diskStore{free: free, shares: shares}
	s.room = &fault.Room{
		Free:   func(context.Context) (int64, error) { return s.free, nil },
		Shares: func(string) (bool, error) { return s.shares, nil },
	}
	s.room.Wrap(c)
	return s
}

// A snapshot that takes its streams at once may spool every stream but the
// first until its turn in the archive: on the store's own disk that counts
// with the store's need, so a store with room for the archive alone refuses
// it up front with a sentence, and nothing is written; with the spool on a
// disk of its own (with room), the same store takes it.
func TestSpoolCountsWithTheStoreItShares(t *testing.T) {
	var ds *diskStore
	e, spool, _ := parallelEnv(t, 3, func(c *keeper.Config) { ds = newDiskStore(c, 1<<40, true) })
	snap := e.snapshot(1, "fits")
	var stored, first int64
	for i, s := range snap.Point.Streams {
		stored += int64(s.Bytes)
		if i == 0 {
			first = int64(s.Bytes)
		}
	}
	if stored == first {
		t.Fatalf("the sample's first stream holds all its bytes (%d); nothing would spool", stored)
	}
	ds.free = stored + stored/20 + keeper.RoomMargin + 1 // the archive fits, the spool beside it does not
	_, err := e.k.SnapshotKept(e.ctx, req(2, "no-room-to-spool"))
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("got %v, want a failure", err)
	}
	mustContain(t, err.Error(), "spooled while the streams are taken at once", "so nothing was written")
	if _, err := os.Stat(filepath.Join(e.dir, "points", module, local, "f2-no-room-to-spool")); !os.IsNotExist(err) {
		t.Errorf("the refused snapshot wrote something: %v", err)
	}
	keeper.NoFiles(t, spool)

	ds.shares = false
	if _, err := e.k.SnapshotKept(e.ctx, req(2, "spool-apart")); err != nil {
		t.Fatalf("with the spool on a disk of its own: %v", err)
	}
}

// TestFreeMarginIsASetting: the margin a snapshot leaves free beyond its
// estimate is Config.FreeMargin (serve --free-margin). With the default, a
// store with a little more room than the kept data refuses it, naming the
// flag that moves the margin; with a small margin the same store takes it,
// and with none (negative) a store with just the estimate free does.
func TestFreeMarginIsASetting(t *testing.T) {
	var ds *diskStore
	e := newEnv(t, func(c *keeper.Config) { ds = newDiskStore(c, 1<<40, false) })
	var stored int64
	for _, s := range e.snapshot(1, "sizing").Point.Streams {
		stored += int64(s.Bytes)
	}
	estimate := stored + stored/20
	ds.free = estimate + 1<<20
	_, err := e.k.SnapshotKept(e.ctx, req(2, "default-margin"))
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("with %d bytes free and the default margin: got %v, want a refusal", ds.free, err)
	}
	mustContain(t, err.Error(), "a margin of 64.0 MiB", "--free-margin", "so nothing was written")

	for _, c := range []struct {
		margin, free int64
	}{{64 << 10, estimate + 64<<10}, {-1, estimate}} {
		k, err := e.keeperOnStore(ds.room, func(cfg *keeper.Config) { cfg.FreeMargin = c.margin })
		if err != nil {
			t.Fatal(err)
		}
		ds.free = c.free
		if _, err := k.SnapshotKept(e.ctx, req(3, fmt.Sprintf("margin%d", c.margin))); err != nil {
			t.Errorf("with a margin of %d and %d bytes free: %v", c.margin, c.free, err)
		}
		ds.free = c.free - 1
		if _, err := k.SnapshotKept(e.ctx, req(4, fmt.Sprintf("margin%d", c.margin))); !errors.Is(err, keeper.ErrFailed) {
			t.Errorf("with a margin of %d and a byte less free: got %v, want a refusal", c.margin, err)
		}
	}
}
