package keeper_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestSecondKeeperWithAnotherDirRefused: a keeper with another directory on
// the same bus and index refuses to start, naming both directories and how
// to run it, and the index keeps every record.
func TestSecondKeeperWithAnotherDirRefused(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	other := t.TempDir()
	_, err := e.keeperOn(other)
	if !errors.Is(err, keeper.ErrOtherStore) || !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("a keeper with another directory: got %v, want it refused", err)
	}
	mustContain(t, err.Error(), e.dir, other, "--bucket and --prefix", "no record was changed")
	list, err := e.k.ListKept(e.ctx, keeper.Request{})
	if err != nil || len(list.Points) != 1 {
		t.Fatalf("the index lost its records: %v %+v", err, list)
	}
	// The same directory is welcome, as often as it starts.
	if _, err := e.keeperOn(e.dir); err != nil {
		t.Fatalf("a keeper with the same directory: %v", err)
	}
}

// TestEmptyDirRefusedWhereTheIndexHoldsRecords: an index made before it
// recorded its directory (no store record) is not claimed by an empty
// directory while it holds records of another.
func TestEmptyDirRefusedWhereTheIndexHoldsRecords(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	if err := e.bus.Delete(e.ctx, "store"); err != nil {
		t.Fatal(err)
	}
	_, err := e.keeperOn(t.TempDir())
	if !errors.Is(err, keeper.ErrOtherStore) {
		t.Fatalf("an empty directory on an index of records: got %v, want it refused", err)
	}
	mustContain(t, err.Error(), "holds 1 point and aside record(s)")
}

// TestIndexMovesToAStoreThatHoldsAllItsRecords: after a copy of every point
// and aside into a new store, a keeper on that store takes the index over
// (a partial copy is refused), restores from it, and the old store is then
// refused.
func TestIndexMovesToAStoreThatHoldsAllItsRecords(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "a")
	e.snapshot(2, "b")
	newDir := t.TempDir()
	from, to := fileStore(t, e.dir), fileStore(t, newDir)
	if _, err := keeper.CopyStores(e.ctx, from, to, module, local, nil); err != nil {
		t.Fatalf("copy: %v", err)
	}
	// Remove one copied point: a store that lacks a record is refused.
	partial := t.TempDir()
	if _, err := keeper.CopyStores(e.ctx, from, fileStore(t, partial), module, local, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(partial, "points", module, local, "f2-b")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.keeperOn(partial); !errors.Is(err, keeper.ErrOtherStore) {
		t.Fatalf("a keeper on a store missing a record: got %v, want it refused", err)
	}
	k2, err := e.keeperOn(newDir)
	if err != nil {
		t.Fatalf("a keeper on the copy of every record: %v", err)
	}
	if _, err := k2.VerifyKept(e.ctx, req(2, "b")); err != nil {
		t.Fatalf("verify on the new store: %v", err)
	}
	if _, err := e.keeperOn(e.dir); !errors.Is(err, keeper.ErrOtherStore) {
		t.Fatalf("the old store after the move: got %v, want it refused", err)
	}
	e.change()
	if _, err := k2.RestoreKept(e.ctx, req(1, "a")); err != nil {
		t.Fatalf("restore from the new store: %v", err)
	}
}
