package keeper_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// diskStore is a store that tells a free space and whether a path shares
// its disk.
type diskStore struct {
	store.Store
	free   int64
	shares bool
}

func (s *diskStore) FreeSpace(context.Context) (int64, error) { return s.free, nil }
func (s *diskStore) SharesDisk(path string) (bool, error)     { return s.shares, nil }

// A snapshot that takes its streams at once may spool every stream but the
// first until its turn in the archive: on the store's own disk that counts
// with the store's need, so a store with room for the archive alone refuses
// it up front with a sentence, and nothing is written; with the spool on a
// disk of its own (with room), the same store takes it.
func TestSpoolCountsWithTheStoreItShares(t *testing.T) {
	var ds *diskStore
	e, spool, _ := parallelEnv(t, 3, func(c *keeper.Config) {
		ds = &diskStore{Store: c.Store, free: 1 << 40, shares: true}
		c.Store = ds
	})
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
