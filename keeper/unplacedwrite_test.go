package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// afterSnapshotBus runs a test's step after each stream's snapshot reached
// the bus (new messages arriving, a lease lost). For injecting faults only.
type afterSnapshotBus struct {
	mu   sync.Mutex
	step func(ctx context.Context, stream string) error
}

// wrap puts b in front of c's bus.
func (b *afterSnapshotBus) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnSnapshot(func(ctx context.Context, s string, data, meta io.WriteCloser, next fault.SnapshotFunc) error {
		err := next(ctx, s, data, meta)
		b.mu.Lock()
		step := b.step
		b.mu.Unlock()
		if err == nil && step != nil {
			err = step(ctx, s)
		}
		return err
	})
}

func (b *afterSnapshotBus) arm(step func(ctx context.Context, stream string) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.step = step
}

// refusalEnv is an env whose keeper writes through a faultStore and takes
// snapshots through an afterSnapshotBus, with a short lease.
func refusalEnv(t *testing.T) (*env, *faultStore, *afterSnapshotBus) {
	fs := &faultStore{}
	bus := &afterSnapshotBus{}
	e := newEnv(t, func(c *keeper.Config) {
		fs.wrap(c)
		bus.wrap(c)
		c.LeaseTTL = 600 * time.Millisecond // renewed every 200 ms
	})
	return e, fs, bus
}

// keysUnder lists the store's objects under prefix.
func keysUnder(t *testing.T, st store.Store, prefix string) []string {
	t.Helper()
	infos, err := st.List(t.Context(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

var errFullInjected = fmt.Errorf("%w: %w", errInjected, store.ErrFull)

// A set-aside copy that is written and then refused (new messages, a
// failed verification, a lost lease, a failed commit, a full store) is
// removed from the store by the verb before it answers; nothing is removed
// from the bus. A removal that fails too is logged, left for the sweep,
// and the sentence says so.
func TestRefusedAsideIsRemovedBeforeTheAnswer(t *testing.T) {
	cases := []struct {
		name string
		arm  func(e *env, fs *faultStore, bus *afterSnapshotBus)
		says []string
	}{
		{"new messages", func(e *env, fs *faultStore, bus *afterSnapshotBus) { bus.arm(e.writeOnce()) },
			[]string{"took new messages while it was being set aside"}},
		{"verification", func(e *env, fs *faultStore, bus *afterSnapshotBus) {
			fs.arm(func(f *faultStore) { f.readKey, f.readAt = "aside/", 0 })
		}, []string{"does not verify"}},
		{"lost lease", func(e *env, fs *faultStore, bus *afterSnapshotBus) { bus.arm(e.takeLeaseAway()) }, nil},
		{"archive commit", func(e *env, fs *faultStore, bus *afterSnapshotBus) {
			fs.arm(func(f *faultStore) { f.commitKey = "/bus.tar" })
		}, []string{"writing the set-aside copy to the store"}},
		{"commit mark", func(e *env, fs *faultStore, bus *afterSnapshotBus) {
			fs.arm(func(f *faultStore) { f.commitKey = "/aside.json" })
		}, []string{"writing aside.json"}},
		{"store full", func(e *env, fs *faultStore, bus *afterSnapshotBus) {
			fs.arm(func(f *faultStore) { f.writeKey, f.writeAt, f.failWith = "aside/", 1, errFullInjected })
		}, []string{"has no room left for it", "needs about", "file://"}},
		{"removal fails", func(e *env, fs *faultStore, bus *afterSnapshotBus) {
			bus.arm(e.writeOnce())
			fs.arm(func(f *faultStore) { f.deleteKey = "aside/" })
		}, []string{"took new messages", "could not be removed", "left for the keeper's sweep of leftovers"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, fs, bus := refusalEnv(t)
			e.snapshot(1, "fp")
			e.change()
			c.arm(e, fs, bus)
			live := e.kept()
			_, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
			if err == nil {
				t.Fatal("the restore went ahead")
			}
			mustContain(t, err.Error(), c.says...)
			bus.arm(nil)
			left := keysUnder(t, fs.Store, "aside/")
			if c.name == "removal fails" {
				if len(left) == 0 {
					t.Errorf("the removal failed, yet nothing is left: %v", err)
				}
			} else if len(left) > 0 {
				t.Errorf("the refused aside left %v in the store (error: %v)", left, err)
			}
			if d := diffKept(e, live); d != "" && c.name != "new messages" && c.name != "removal fails" {
				t.Errorf("a refused aside changed the bus:\n%s", d)
			}
			if _, err := e.k.VerifyKept(e.ctx, req(1, "fp")); err != nil {
				t.Errorf("the point after a refused aside: %v", err)
			}
		})
	}
}

// writeOnce is a step that writes one message to the kept data's stream,
// once: the module's writers, still writing while it is set aside.
func (e *env) writeOnce() func(context.Context, string) error {
	var once sync.Once
	return func(ctx context.Context, stream string) error {
		var err error
		once.Do(func() {
			var kv interface {
				PutString(context.Context, string, string) (uint64, error)
			}
			if kv, err = e.js.KeyValue(ctx, e.names.Bus); err == nil {
				_, err = kv.PutString(ctx, "late", "written while the data was set aside")
			}
		})
		return err
	}
}

// takeLeaseAway is a step that makes the kept data's lease another's, as a
// keeper that judged it lapsed would, and waits until the verb sees it lost
// (its context ends).
func (e *env) takeLeaseAway() func(context.Context, string) error {
	var once sync.Once
	return func(ctx context.Context, stream string) error {
		var err error
		once.Do(func() {
			if err = e.bus.Put(ctx, "lease."+module+"."+local, []byte(`{"holder":"another keeper"}`)); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(time.Minute):
				err = errors.New("the verb did not see its lease lost within a minute")
			}
		})
		return err
	}
}

// A point written and then refused (the store full at its first part,
// part way through its archive, at the archive's commit or at its commit
// mark) is removed from the store before the verb answers: the store holds
// nothing of it, the earlier point of the same form and fingerprint is
// intact (in place, or, once the new archive began to replace it, set
// aside whole), and the bus is as it was. The sentence names the store and
// the room needed.
func TestRefusedPointIsRemovedBeforeTheAnswer(t *testing.T) {
	cases := []struct {
		name    string
		arm     func(f *faultStore)
		inPlace bool // the earlier point is still the point; else it is set aside whole
	}{
		{"first part", func(f *faultStore) { f.writeKey, f.writeAt = "points/", 1 }, true},
		{"mid-archive", func(f *faultStore) { f.writeKey, f.writeAt = "points/", 300<<10 }, true},
		{"archive commit", func(f *faultStore) { f.commitKey = "points/" + module + "/" + local + "/f1-fp/bus.tar" }, false},
		{"commit mark", func(f *faultStore) { f.commitKey = "/point.json" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, fs := storeFaultEnv(t)
			addRandom(t, e, 1024) // an archive of several blocks
			e.snapshot(1, "fp")
			live := e.kept()
			fs.arm(func(f *faultStore) { c.arm(f); f.failWith = errFullInjected })
			_, err := e.k.SnapshotKept(e.ctx, req(1, "fp"))
			fs.arm(func(f *faultStore) { f.writeKey, f.commitKey = "", "" })
			if !errors.Is(err, keeper.ErrFailed) || !errors.Is(err, store.ErrFull) {
				t.Fatalf("got %v, want a failure for want of room", err)
			}
			mustContain(t, err.Error(), "was not taken", "has no room left for it", "needs about", "file://"+e.dir)
			if d := diffKept(e, live); d != "" {
				t.Errorf("a refused point changed the bus:\n%s", d)
			}
			prefix := "points/" + module + "/" + local + "/f1-fp/"
			rep, verr := e.k.VerifyKept(e.ctx, req(1, "fp"))
			if c.inPlace {
				if verr != nil {
					t.Fatalf("the earlier point after a refused one: %v (%v)", verr, rep)
				}
			} else {
				if left := keysUnder(t, fs.Store, prefix); len(left) > 0 {
					t.Errorf("the refused point left %v in the store", left)
				}
				mustContain(t, err.Error(), "the earlier point is set aside whole as")
				list, lerr := e.k.ListKept(e.ctx, keeper.Request{Module: module})
				if lerr != nil || len(list.Asides) != 1 || list.Asides[0].Reason != keeper.ReasonReplaced {
					t.Fatalf("asides after a refused point: %v (%v), want the earlier point's", list, lerr)
				}
				if len(list.Points) != 0 {
					t.Errorf("the index still lists %d point(s) after the earlier one was set aside and the new one refused: %+v", len(list.Points), list.Points[0])
				}
				if _, err := e.k.VerifyKept(e.ctx, keeper.Request{From: "aside/" + list.Asides[0].ID}); err != nil {
					t.Errorf("the earlier point, set aside: %v", err)
				}
			}
			for _, k := range keysUnder(t, fs.Store, "aside/") {
				dir := k[:strings.LastIndexByte(k, '/')]
				if len(keysUnder(t, fs.Store, dir+"/aside.json")) == 0 {
					t.Errorf("%s is in the store without its aside.json", k)
				}
			}
		})
	}
}
