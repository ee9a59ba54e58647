// Package fault wraps the keeper's ports for tests that make them fail,
// wait or watch: keeper.Bus, keeper.Index and keeper.Acts (Bus), and
// store.Store with its writers and objects (Store). Every call goes to the
// real port the fake wraps unless the test set a hook for its method; a
// hook gets the call's arguments and the real method (next) and may fail
// the call, call next late or with other arguments, or watch it. Hooks may
// be set and cleared while the keeper runs.
//
// It is for tests only: only _test.go files import it. It may import the
// keeper's ports (keeper, store) and the standard library.
package fault

import (
	"context"
	"io"
	"sync"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// The real methods a hook of Bus is handed as next.
type (
	SnapshotFunc     func(ctx context.Context, stream string, data, meta io.WriteCloser) error
	RestoreFunc      func(ctx context.Context, stream string, data, meta io.Reader) error
	StreamFunc       func(ctx context.Context, name string) (*keeper.StreamInfo, error)
	DeleteStreamFunc func(ctx context.Context, stream string) error
	DeleteMsgsFunc   func(ctx context.Context, stream string, seqs []uint64) error
	SetPositionFunc  func(ctx context.Context, p keeper.Position) error
	CensusFunc       func(ctx context.Context, q keeper.CensusQuery) ([]string, []keeper.Position, error)
	PutFunc          func(ctx context.Context, key string, value []byte) error
	KeysFunc         func(ctx context.Context, prefix string) ([]string, error)
	CreateKeyFunc    func(ctx context.Context, key string, value []byte) (uint64, error)
	GetRevFunc       func(ctx context.Context, key string) ([]byte, uint64, error)
	RecordFunc       func(ctx context.Context, a keeper.Act) error
)

// Bus is a keeper.Bus, and a keeper.Index and keeper.Acts when it wraps
// those too (WrapAll), whose calls go to the ports it wraps but where a
// hook is set. It has none of the optional interfaces of what it wraps
// (keeper.ActsQueue): acts through it are recorded as they happen.
type Bus struct {
	keeper.Bus
	keeper.Index
	keeper.Acts

	mu           sync.Mutex
	snapshot     func(ctx context.Context, stream string, data, meta io.WriteCloser, next SnapshotFunc) error
	restore      func(ctx context.Context, stream string, data, meta io.Reader, next RestoreFunc) error
	stream       func(ctx context.Context, name string, next StreamFunc) (*keeper.StreamInfo, error)
	deleteStream func(ctx context.Context, stream string, next DeleteStreamFunc) error
	deleteMsgs   func(ctx context.Context, stream string, seqs []uint64, next DeleteMsgsFunc) error
	setPosition  func(ctx context.Context, p keeper.Position, next SetPositionFunc) error
	census       func(ctx context.Context, q keeper.CensusQuery, next CensusFunc) ([]string, []keeper.Position, error)
	put          func(ctx context.Context, key string, value []byte, next PutFunc) error
	record       func(ctx context.Context, a keeper.Act, next RecordFunc) error
	keys         func(ctx context.Context, prefix string, next KeysFunc) ([]string, error)
	create       func(ctx context.Context, key string, value []byte, next CreateKeyFunc) (uint64, error)
	getRev       func(ctx context.Context, key string, next GetRevFunc) ([]byte, uint64, error)
}

// WrapAll puts f in front of c's bus, index and acts.
func (f *Bus) WrapAll(c *keeper.Config) {
	f.Bus, f.Index, f.Acts = c.Bus, c.Index, c.Acts
	c.Bus, c.Index, c.Acts = f, f, f
}

// Wrap puts f in front of c's bus alone.
func (f *Bus) Wrap(c *keeper.Config) {
	f.Bus = c.Bus
	c.Bus = f
}

// WrapIndex puts f in front of c's index alone.
func (f *Bus) WrapIndex(c *keeper.Config) {
	f.Index = c.Index
	c.Index = f
}

// WrapActs puts f in front of c's acts alone.
func (f *Bus) WrapActs(c *keeper.Config) {
	f.Acts = c.Acts
	c.Acts = f
}

// hook reads one hook under the lock.
func hook[H any](mu *sync.Mutex, h *H) H {
	mu.Lock()
	defer mu.Unlock()
	return *h
}

// set sets one hook under the lock.
func set[H any](mu *sync.Mutex, h *H, v H) {
	mu.Lock()
	defer mu.Unlock()
	*h = v
}

// OnSnapshot sets the hook of Snapshot; nil clears it.
func (f *Bus) OnSnapshot(h func(ctx context.Context, stream string, data, meta io.WriteCloser, next SnapshotFunc) error) {
	set(&f.mu, &f.snapshot, h)
}

// OnRestore sets the hook of Restore; nil clears it.
func (f *Bus) OnRestore(h func(ctx context.Context, stream string, data, meta io.Reader, next RestoreFunc) error) {
	set(&f.mu, &f.restore, h)
}

// OnStream sets the hook of Stream; nil clears it.
func (f *Bus) OnStream(h func(ctx context.Context, name string, next StreamFunc) (*keeper.StreamInfo, error)) {
	set(&f.mu, &f.stream, h)
}

// OnDeleteStream sets the hook of DeleteStream; nil clears it.
func (f *Bus) OnDeleteStream(h func(ctx context.Context, stream string, next DeleteStreamFunc) error) {
	set(&f.mu, &f.deleteStream, h)
}

// OnDeleteMessages sets the hook of DeleteMessages; nil clears it.
func (f *Bus) OnDeleteMessages(h func(ctx context.Context, stream string, seqs []uint64, next DeleteMsgsFunc) error) {
	set(&f.mu, &f.deleteMsgs, h)
}

// OnSetPosition sets the hook of SetPosition; nil clears it.
func (f *Bus) OnSetPosition(h func(ctx context.Context, p keeper.Position, next SetPositionFunc) error) {
	set(&f.mu, &f.setPosition, h)
}

// OnCensus sets the hook of Census; nil clears it.
func (f *Bus) OnCensus(h func(ctx context.Context, q keeper.CensusQuery, next CensusFunc) ([]string, []keeper.Position, error)) {
	set(&f.mu, &f.census, h)
}

// OnPut sets the hook of the index's Put; nil clears it.
func (f *Bus) OnPut(h func(ctx context.Context, key string, value []byte, next PutFunc) error) {
	set(&f.mu, &f.put, h)
}

// OnRecord sets the hook of the acts' Record; nil clears it.
func (f *Bus) OnRecord(h func(ctx context.Context, a keeper.Act, next RecordFunc) error) {
	set(&f.mu, &f.record, h)
}

// OnKeys sets the hook of the index's Keys; nil clears it.
func (f *Bus) OnKeys(h func(ctx context.Context, prefix string, next KeysFunc) ([]string, error)) {
	set(&f.mu, &f.keys, h)
}

// OnCreate sets the hook of the index's Create; nil clears it.
func (f *Bus) OnCreate(h func(ctx context.Context, key string, value []byte, next CreateKeyFunc) (uint64, error)) {
	set(&f.mu, &f.create, h)
}

// OnGetRev sets the hook of the index's GetRev; nil clears it.
func (f *Bus) OnGetRev(h func(ctx context.Context, key string, next GetRevFunc) ([]byte, uint64, error)) {
	set(&f.mu, &f.getRev, h)
}

// Snapshot is the bus's, or its hook's.
func (f *Bus) Snapshot(ctx context.Context, stream string, data, meta io.WriteCloser) error {
	if h := hook(&f.mu, &f.snapshot); h != nil {
		return h(ctx, stream, data, meta, f.Bus.Snapshot)
	}
	return f.Bus.Snapshot(ctx, stream, data, meta)
}

// Restore is the bus's, or its hook's.
func (f *Bus) Restore(ctx context.Context, stream string, data, meta io.Reader) error {
	if h := hook(&f.mu, &f.restore); h != nil {
		return h(ctx, stream, data, meta, f.Bus.Restore)
	}
	return f.Bus.Restore(ctx, stream, data, meta)
}

// Stream is the bus's, or its hook's.
func (f *Bus) Stream(ctx context.Context, name string) (*keeper.StreamInfo, error) {
	if h := hook(&f.mu, &f.stream); h != nil {
		return h(ctx, name, f.Bus.Stream)
	}
	return f.Bus.Stream(ctx, name)
}

// DeleteStream is the bus's, or its hook's.
func (f *Bus) DeleteStream(ctx context.Context, stream string) error {
	if h := hook(&f.mu, &f.deleteStream); h != nil {
		return h(ctx, stream, f.Bus.DeleteStream)
	}
	return f.Bus.DeleteStream(ctx, stream)
}

// DeleteMessages is the bus's, or its hook's.
func (f *Bus) DeleteMessages(ctx context.Context, stream string, seqs []uint64) error {
	if h := hook(&f.mu, &f.deleteMsgs); h != nil {
		return h(ctx, stream, seqs, f.Bus.DeleteMessages)
	}
	return f.Bus.DeleteMessages(ctx, stream, seqs)
}

// SetPosition is the bus's, or its hook's.
func (f *Bus) SetPosition(ctx context.Context, p keeper.Position) error {
	if h := hook(&f.mu, &f.setPosition); h != nil {
		return h(ctx, p, f.Bus.SetPosition)
	}
	return f.Bus.SetPosition(ctx, p)
}

// Census is the bus's, or its hook's.
func (f *Bus) Census(ctx context.Context, q keeper.CensusQuery) ([]string, []keeper.Position, error) {
	if h := hook(&f.mu, &f.census); h != nil {
		return h(ctx, q, f.Bus.Census)
	}
	return f.Bus.Census(ctx, q)
}

// Put is the index's, or its hook's.
func (f *Bus) Put(ctx context.Context, key string, value []byte) error {
	if h := hook(&f.mu, &f.put); h != nil {
		return h(ctx, key, value, f.Index.Put)
	}
	return f.Index.Put(ctx, key, value)
}

// Record is the acts', or its hook's.
func (f *Bus) Record(ctx context.Context, a keeper.Act) error {
	if h := hook(&f.mu, &f.record); h != nil {
		return h(ctx, a, f.Acts.Record)
	}
	return f.Acts.Record(ctx, a)
}

// Keys is the index's, or its hook's.
func (f *Bus) Keys(ctx context.Context, prefix string) ([]string, error) {
	if h := hook(&f.mu, &f.keys); h != nil {
		return h(ctx, prefix, f.Index.Keys)
	}
	return f.Index.Keys(ctx, prefix)
}

// Create is the index's, or its hook's.
func (f *Bus) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	if h := hook(&f.mu, &f.create); h != nil {
		return h(ctx, key, value, f.Index.Create)
	}
	return f.Index.Create(ctx, key, value)
}

// GetRev is the index's, or its hook's.
func (f *Bus) GetRev(ctx context.Context, key string) ([]byte, uint64, error) {
	if h := hook(&f.mu, &f.getRev); h != nil {
		return h(ctx, key, f.Index.GetRev)
	}
	return f.Index.GetRev(ctx, key)
}

// Queue is a Bus whose acts are a keeper.ActsQueue too: Queue is the
// test's Queued, as the acts it wraps need not have a queue.
type Queue struct {
	Bus
	Queued func(ctx context.Context, a keeper.Act) error
}

// WrapActs puts q in front of c's acts alone.
func (q *Queue) WrapActs(c *keeper.Config) {
	q.Acts = c.Acts
	c.Acts = q
}

// Queue is Queued's.
func (q *Queue) Queue(ctx context.Context, a keeper.Act) error { return q.Queued(ctx, a) }
