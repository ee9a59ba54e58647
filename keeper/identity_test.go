package keeper_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/transfer"
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
	if _, err := transfer.CopyStores(e.ctx, from, to, module, local, nil, nil); err != nil {
		t.Fatalf("copy: %v", err)
	}
	// Remove one copied point: a store that lacks a record is refused.
	partial := t.TempDir()
	if _, err := transfer.CopyStores(e.ctx, from, fileStore(t, partial), module, local, nil, nil); err != nil {
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

// racingStore is a store where another keeper writes its own store.json
// over the one being committed, as two keepers starting at once on a new
// S3 store do: the commit then fails its read-back.
func racingStore(real store.Store) store.Store {
	raced := false
	f := &fault.Store{Store: real}
	f.OnCreate(func(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
		w, err := next(ctx, key)
		if err != nil || key != "store.json" || raced {
			return w, err
		}
		raced = true
		return &fault.Writer{Writer: w, OnCommit: func(ctx context.Context, _ func(context.Context) (store.Info, error)) (store.Info, error) {
			w.Abort()
			other, err := real.Create(ctx, "store.json")
			if err != nil {
				return store.Info{}, err
			}
			other.Write([]byte(`{"id":"0123456789abcdef0123456789abcdef","created":"2026-12-01T00:00:00Z"}`))
			if _, err := other.Commit(ctx); err != nil {
				return store.Info{}, err
			}
			return store.Info{}, errors.New("store.json reads back as another object right after it was written (another writer replaced it)")
		}}, nil
	})
	return f
}

// Two keepers making a new store's id at once: the one whose write lost
// takes the id the store holds, and both serve the same store.
func TestKeepersStartingAtOnceOnANewStore(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	racing := racingStore(fileStore(t, dir))
	// An index of its own: the env's keeper claimed the default one.
	ad := e.bed.Adapter(jsbus.WithBucket("raced"), jsbus.WithPrefix("raced"), jsbus.WithLogger(slog.New(slog.DiscardHandler)))
	onRaced := func(c *keeper.Config) { c.Bus, c.Index, c.Acts, c.Logger = ad, ad, ad, slog.New(slog.DiscardHandler) }
	for i := range 2 {
		if _, err := e.keeperOnStore(racing, onRaced); err != nil {
			t.Fatalf("keeper %d on a new store whose id another keeper wrote at once: %v", i+1, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "store.json"))
	if err != nil || !strings.Contains(string(data), "0123456789abcdef0123456789abcdef") {
		t.Errorf("store.json holds %s (%v); want the other keeper's id", data, err)
	}
}

// TestEmptyIndexMovesToAnotherStore: an index that records no point and no
// aside (its store was empty when it was copied) moves to a new store, as
// one holding all its records does: the keeper on the new store starts, a
// point taken there restores, and the old store is refused from then on.
// An index with an unfinished restore's journal does not move, nor does
// one whose store's URL is this keeper's (the same path on another disk:
// a second keeper that must share the first one's store).
func TestEmptyIndexMovesToAnotherStore(t *testing.T) {
	e := newEnv(t)
	journal := []byte(`{"module":"billing","local":"ledger"}`)
	if err := e.bus.Put(e.ctx, "journal.billing.ledger", journal); err != nil {
		t.Fatal(err)
	}
	if _, err := e.keeperOn(t.TempDir()); !errors.Is(err, keeper.ErrOtherStore) {
		t.Fatalf("a new store on an index with a journal: got %v, want it refused", err)
	}
	if err := e.bus.Delete(e.ctx, "journal.billing.ledger"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(e.dir, "store.json"), filepath.Join(e.dir, "store.json.other-disk")); err != nil {
		t.Fatal(err)
	}
	_, err := e.keeperOn(e.dir)
	if !errors.Is(err, keeper.ErrOtherStore) {
		t.Fatalf("the same path without its id: got %v, want it refused", err)
	}
	mustContain(t, err.Error(), "has no store id yet")
	if err := os.Rename(filepath.Join(e.dir, "store.json.other-disk"), filepath.Join(e.dir, "store.json")); err != nil {
		t.Fatal(err)
	}

	newDir := t.TempDir()
	k2, err := e.keeperOn(newDir)
	if err != nil {
		t.Fatalf("a keeper on a new store, the index recording nothing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(newDir, "store.json")); err != nil {
		t.Fatalf("the new store has no id of its own: %v", err)
	}
	if _, err := e.keeperOn(e.dir); !errors.Is(err, keeper.ErrOtherStore) {
		t.Fatalf("the old store after the move: got %v, want it refused", err)
	}
	if _, err := k2.SnapshotKept(e.ctx, req(1, "after-move")); err != nil {
		t.Fatalf("a snapshot on the new store: %v", err)
	}
	e.change()
	if _, err := k2.RestoreKept(e.ctx, req(1, "after-move")); err != nil {
		t.Fatalf("a restore from the new store: %v", err)
	}
}
