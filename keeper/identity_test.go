package keeper_test

import (
	"errors"
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
