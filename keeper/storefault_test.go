package keeper_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// faultStore wraps a real store and fails the writes or the reads of
// objects whose key holds a substring, after a number of bytes. It is for
// injecting faults only.
type faultStore struct {
	store.Store
	mu        sync.Mutex
	writeKey  string // fail writes to keys holding this, after writeAfter bytes
	writeAt   int64
	commitKey string // fail the commit of keys holding this
	readKey   string // fail reads of keys holding this once readAt bytes were read from them, all reads counted
	readAt    int64
	read      int64
	failWith  error  // the write or commit fault's error, when not errInjected (a store that is full, say)
	deleteKey string // fail deletes of keys holding this
}

func (f *faultStore) Delete(ctx context.Context, key string) error {
	if f.match(key, &f.deleteKey) {
		return errors.Join(errInjected, errors.New("the store refused the delete"))
	}
	return f.Store.Delete(ctx, key)
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

func (f *faultStore) Create(ctx context.Context, key string) (store.Writer, error) {
	w, err := f.Store.Create(ctx, key)
	if err != nil {
		return nil, err
	}
	fw := &faultWriter{Writer: w, err: errInjected}
	if f.match(key, &f.writeKey) {
		fw.failAfter = f.writeAt
	}
	fw.failCommit = f.match(key, &f.commitKey)
	f.mu.Lock()
	if f.failWith != nil {
		fw.err = f.failWith
	}
	f.mu.Unlock()
	return fw, nil
}

func (f *faultStore) Open(ctx context.Context, key string) (store.Object, error) {
	o, err := f.Store.Open(ctx, key)
	if err != nil || !f.match(key, &f.readKey) {
		return o, err
	}
	return &faultObject{Object: o, f: f}, nil
}

type faultWriter struct {
	store.Writer
	n          int64
	failAfter  int64 // -1: never
	failCommit bool
	err        error // the fault's
}

func (w *faultWriter) Write(p []byte) (int, error) {
	if w.failAfter > 0 && w.n+int64(len(p)) > w.failAfter {
		return 0, errors.Join(w.err, errors.New("the store stopped taking bytes"))
	}
	w.n += int64(len(p))
	return w.Writer.Write(p)
}

func (w *faultWriter) Commit(ctx context.Context) (store.Info, error) {
	if w.failCommit {
		w.Writer.Abort()
		return store.Info{}, w.err
	}
	return w.Writer.Commit(ctx)
}

type faultObject struct {
	store.Object
	f *faultStore
}

func (o *faultObject) ReadAt(p []byte, off int64) (int, error) {
	if o.f.take(int64(len(p))) < int64(len(p)) {
		return 0, errInjected
	}
	return o.Object.ReadAt(p, off)
}

func (o *faultObject) Reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	r, err := o.Object.Reader(ctx, off, n)
	if err != nil {
		return nil, err
	}
	return &faultReader{r: r, f: o.f}, nil
}

type faultReader struct {
	r io.ReadCloser
	f *faultStore
}

func (r *faultReader) Read(p []byte) (int, error) {
	ok := r.f.take(int64(len(p)))
	if ok == 0 {
		return 0, errInjected
	}
	return r.r.Read(p[:ok])
}

func (r *faultReader) Close() error { return r.r.Close() }

// storeFaultEnv is an env whose keeper keeps its points in a faultStore
// over the file store.
func storeFaultEnv(t *testing.T) (*env, *faultStore) {
	var fs *faultStore
	e := newEnv(t, func(c *keeper.Config) {
		fs = &faultStore{Store: c.Store}
		c.Store = fs
	})
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
	store.Store
	free int64
}

func (s *smallStore) FreeSpace(context.Context) (int64, error) { return s.free, nil }

// A snapshot, or a restore's aside, that cannot fit is refused up front with
// a sentence that says what it needs, what is free and where, and nothing is
// written; one that runs out of room part way leaves no point.
func TestSnapshotThatCannotFitIsRefused(t *testing.T) {
	var small *smallStore
	e := newEnv(t, func(c *keeper.Config) {
		small = &smallStore{Store: c.Store, free: 1 << 40}
		c.Store = small
	})
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
