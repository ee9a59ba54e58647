package fault

import (
	"context"
	"io"
	"sync"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// The real methods a hook of Store is handed as next.
type (
	CreateFunc func(ctx context.Context, key string) (store.Writer, error)
	OpenFunc   func(ctx context.Context, key string) (store.Object, error)
	DeleteFunc func(ctx context.Context, key string) error
)

// Store is a store.Store whose calls go to the store it wraps but where a
// hook is set. It has none of the optional interfaces of what it wraps
// (store.Copier, store.FreeSpacer, store.DiskSharer), as a store that has
// none; Room is one that tells its room.
type Store struct {
	store.Store

	mu     sync.Mutex
	create func(ctx context.Context, key string, next CreateFunc) (store.Writer, error)
	open   func(ctx context.Context, key string, next OpenFunc) (store.Object, error)
	delete func(ctx context.Context, key string, next DeleteFunc) error
}

// Wrap puts f in front of c's store.
func (f *Store) Wrap(c *keeper.Config) {
	f.Store = c.Store
	c.Store = f
}

// OnCreate sets the hook of Create; nil clears it.
func (f *Store) OnCreate(h func(ctx context.Context, key string, next CreateFunc) (store.Writer, error)) {
	set(&f.mu, &f.create, h)
}

// OnOpen sets the hook of Open; nil clears it.
func (f *Store) OnOpen(h func(ctx context.Context, key string, next OpenFunc) (store.Object, error)) {
	set(&f.mu, &f.open, h)
}

// OnDelete sets the hook of Delete; nil clears it.
func (f *Store) OnDelete(h func(ctx context.Context, key string, next DeleteFunc) error) {
	set(&f.mu, &f.delete, h)
}

// Create is the store's, or its hook's.
func (f *Store) Create(ctx context.Context, key string) (store.Writer, error) {
	if h := hook(&f.mu, &f.create); h != nil {
		return h(ctx, key, f.Store.Create)
	}
	return f.Store.Create(ctx, key)
}

// Open is the store's, or its hook's.
func (f *Store) Open(ctx context.Context, key string) (store.Object, error) {
	if h := hook(&f.mu, &f.open); h != nil {
		return h(ctx, key, f.Store.Open)
	}
	return f.Store.Open(ctx, key)
}

// Delete is the store's, or its hook's.
func (f *Store) Delete(ctx context.Context, key string) error {
	if h := hook(&f.mu, &f.delete); h != nil {
		return h(ctx, key, f.Store.Delete)
	}
	return f.Store.Delete(ctx, key)
}

// Room is a Store that tells a free space and whether a path shares its
// disk (store.FreeSpacer, store.DiskSharer) as the test says, not as the
// store it wraps would. Set Free (and Shares) before the keeper uses it.
type Room struct {
	Store
	// Free is the store's free space.
	Free func(ctx context.Context) (int64, error)
	// Shares says whether path shares the store's disk; nil: it does not.
	Shares func(path string) (bool, error)
}

// Wrap puts r in front of c's store.
func (r *Room) Wrap(c *keeper.Config) {
	r.Store.Store = c.Store
	c.Store = r
}

// FreeSpace is Free's.
func (r *Room) FreeSpace(ctx context.Context) (int64, error) { return r.Free(ctx) }

// SharesDisk is Shares', or false.
func (r *Room) SharesDisk(path string) (bool, error) {
	if r.Shares == nil {
		return false, nil
	}
	return r.Shares(path)
}

// Writer is a store.Writer whose writes and commit go to the writer it
// wraps but where a hook is set. A test's Create hook returns one.
type Writer struct {
	store.Writer
	// OnWrite, when set, runs before each Write with the bytes written
	// before it; an error fails the write, and nothing of p is written.
	OnWrite func(p []byte, written int64) error
	// OnCommit, when set, commits in place of the writer (next).
	OnCommit func(ctx context.Context, next func(context.Context) (store.Info, error)) (store.Info, error)
	written  int64
}

// Write is the writer's, unless OnWrite fails it.
func (w *Writer) Write(p []byte) (int, error) {
	if w.OnWrite != nil {
		if err := w.OnWrite(p, w.written); err != nil {
			return 0, err
		}
	}
	w.written += int64(len(p))
	return w.Writer.Write(p)
}

// Commit is the writer's, or OnCommit's.
func (w *Writer) Commit(ctx context.Context) (store.Info, error) {
	if w.OnCommit != nil {
		return w.OnCommit(ctx, w.Writer.Commit)
	}
	return w.Writer.Commit(ctx)
}

// Object is a store.Object whose reads are metered: before each read of n
// bytes, Take says how many of them may be read (fewer: the read fails
// with Err, or reads that many when some may).
type Object struct {
	store.Object
	Take func(n int64) int64
	Err  error
}

// ReadAt is the object's, or Err when Take allows less than all of p.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if o.Take(int64(len(p))) < int64(len(p)) {
		return 0, o.Err
	}
	return o.Object.ReadAt(p, off)
}

// Reader is the object's, metered by Take.
func (o *Object) Reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	r, err := o.Object.Reader(ctx, off, n)
	if err != nil {
		return nil, err
	}
	return &reader{r: r, o: o}, nil
}

type reader struct {
	r io.ReadCloser
	o *Object
}

// Read reads as many bytes as Take allows, and fails with Err when none.
func (r *reader) Read(p []byte) (int, error) {
	ok := r.o.Take(int64(len(p)))
	if ok == 0 {
		return 0, r.o.Err
	}
	return r.r.Read(p[:ok])
}

func (r *reader) Close() error { return r.r.Close() }
