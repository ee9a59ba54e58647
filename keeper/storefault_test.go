package keeper_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// faultStore fails, through the hooks of a fault.Store in front of the
// real store (Store), the writes or the reads of objects whose key holds a
// substring, after a number of bytes. It is for injecting faults only.
type faultStore struct {
	Store     store.Store // the real store
	mu        sync.Mutex
	writeKey  string // fail writes to keys holding this, after writeAt bytes
	writeAt   int64
	commitKey string // fail the commit of keys holding this
	readKey   string // fail reads of keys holding this once readAt bytes were read from them, all reads counted
	readAt    int64
	read      int64
	failWith  error  // the write or commit fault's error, when not errInjected (a store that is full, say)
	deleteKey string // fail deletes of keys holding this
}

// wrap puts f in front of c's store.
func (f *faultStore) wrap(c *keeper.Config) {
	fs := &fault.Store{}
	fs.Wrap(c)
	f.Store = fs.Store
	fs.OnDelete(func(ctx context.Context, key string, next fault.DeleteFunc) error {
		if f.match(key, &f.deleteKey) {
			return errors.Join(errInjected, errors.New("the store refused the delete"))
		}
		return next(ctx, key)
	})
	fs.OnCreate(f.create)
	fs.OnOpen(func(ctx context.Context, key string, next fault.OpenFunc) (store.Object, error) {
		o, err := next(ctx, key)
		if err != nil || !f.match(key, &f.readKey) {
			return o, err
		}
		return &fault.Object{Object: o, Take: f.take, Err: errInjected}, nil
	})
}

// take counts n bytes read from a matching key, and says how many of them
// may be read before the fault.
func (f *faultStore) take(n int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	room := max(f.readAt-f.read, 0)
	n = min(n, room)
	f.read += n
	return n
}

func (f *faultStore) arm(fn func(f *faultStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faultStore) match(key string, which *string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *which != "" && strings.Contains(key, *which)
}

// create is the real store's writer with the write and commit faults armed
// for key when it is made.
func (f *faultStore) create(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
	w, err := next(ctx, key)
	if err != nil {
		return nil, err
	}
	var failAfter int64 // 0: never
	if f.match(key, &f.writeKey) {
		failAfter = f.writeAt
	}
	failCommit := f.match(key, &f.commitKey)
	fail := errInjected
	f.mu.Lock()
	if f.failWith != nil {
		fail = f.failWith
	}
	f.mu.Unlock()
	fw := &fault.Writer{Writer: w}
	if failAfter > 0 {
		fw.OnWrite = func(p []byte, written int64) error {
			if written+int64(len(p)) > failAfter {
				return errors.Join(fail, errors.New("the store stopped taking bytes"))
			}
			return nil
		}
	}
	if failCommit {
		fw.OnCommit = func(context.Context, func(context.Context) (store.Info, error)) (store.Info, error) {
			w.Abort()
			return store.Info{}, fail
		}
	}
	return fw, nil
}

// storeFaultEnv is an env whose keeper keeps its points in a faultStore
// over the file store.
func storeFaultEnv(t *testing.T) (*env, *faultStore) {
	fs := &faultStore{}
	e := newEnv(t, fs.wrap)
	return e, fs
}

// A store that fails mid-snapshot leaves no visible point, and says so.
func TestStoreFailingMidSnapshotLeavesNoPoint(t *testing.T) {
	for _, how := range []string{"write", "commit", "record"} {
		t.Run(how, func(t *testing.T) {
			e, fs := storeFaultEnv(t)
			fs.arm(func(f *faultStore) {
				switch how {
				case "write":
					f.writeKey, f.writeAt = "/bus.tar", 100<<10
				case "commit":
					f.commitKey = "/bus.tar"
				case "record":
					f.commitKey = "/point.json"
				}
			})
			_, err := e.k.SnapshotKept(e.ctx, req(1, "fp"))
			if !errors.Is(err, keeper.ErrFailed) {
				t.Fatalf("got %v, want a failure", err)
			}
			mustContain(t, err.Error(), "was not taken", "no point")
			rep, err := e.k.ListKept(e.ctx, keeper.Request{Module: module})
			if err != nil || len(rep.Points) != 0 {
				t.Fatalf("points listed after a failed snapshot: %v (%v)", rep, err)
			}
			if _, err := e.k.VerifyKept(e.ctx, req(1, "fp")); !errors.Is(err, keeper.ErrNotFound) {
				t.Errorf("verify of the failed point: %v, want not found", err)
			}
			fs.arm(func(f *faultStore) { f.writeKey, f.commitKey = "", "" })
			e.snapshot(1, "fp") // and the next one succeeds
		})
	}
}

// A store that fails while a restore reads the point is handled like a bus
// failure: the aside is put back and the live data is whole.
func TestStoreFailingMidRestorePutsTheAsideBack(t *testing.T) {
	e, fs := storeFaultEnv(t)
	addRandom(t, e, 2048) // enough that the archive's data is read in several blocks
	point := e.snapshot(1, "fp").Point
	e.change()
	live := e.kept()
	// The whole verification reads the point once, before anything is
	// touched; the fault comes halfway through the restore's own reading.
	fs.arm(func(f *faultStore) { f.readKey, f.readAt = "points/", point.ArchiveSize*3/2 })
	_, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("got %v, want a failure", err)
	}
	mustContain(t, err.Error(), "put back")
	if d := diffKept(e, live); d != "" {
		t.Fatalf("the live data is not whole after the store failed:\n%s\n(error: %v)", d, err)
	}
	fs.arm(func(f *faultStore) { f.readKey, f.read = "", 0 })
	if _, err := e.k.RestoreKept(e.ctx, req(1, "fp")); err != nil {
		t.Fatalf("restore once the store answers: %v", err)
	}
}

// smallStore is a store that says it has little room left.
type smallStore struct {
	free int64
}

// wrap puts in front of c's store one that tells s.free as its free space.
func (s *smallStore) wrap(c *keeper.Config) {
	r := &fault.Room{Free: func(context.Context) (int64, error) { return s.free, nil }}
	r.Wrap(c)
}

// A snapshot, or a restore's aside, that cannot fit is refused up front with
// a sentence that says what it needs, what is free and where, and nothing is
// written; one that runs out of room part way leaves no point.
func TestSnapshotThatCannotFitIsRefused(t *testing.T) {
	small := &smallStore{free: 1 << 40}
	e := newEnv(t, small.wrap)
	e.snapshot(1, "fits")
	small.free = 10 << 20
	_, err := e.k.SnapshotKept(e.ctx, req(2, "too-big"))
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("got %v, want a failure", err)
	}
	mustContain(t, err.Error(), "10.0 MiB free", "needs about", "so nothing was written", e.dir)
	if _, err := os.Stat(filepath.Join(e.dir, "points", module, local, "f2-too-big")); !os.IsNotExist(err) {
		t.Errorf("the refused snapshot wrote something: %v", err)
	}
	e.change()
	live := e.kept()
	if _, err := e.k.RestoreKept(e.ctx, req(1, "fits")); !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("a restore whose aside cannot fit: got %v, want a failure", err)
	}
	if d := diffKept(e, live); d != "" {
		t.Errorf("a restore refused for room changed the bus:\n%s", d)
	}
}
