package keeper_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// commitStepStore runs a test's step before the commit of a write whose
// key holds a substring, through a fault.Store in front of the real store
// (Store). For injecting faults (a race) only.
type commitStepStore struct {
	Store store.Store // the real store
	mu    sync.Mutex
	key   string
	step  func(ctx context.Context) error
}

// wrap puts s in front of c's store.
func (s *commitStepStore) wrap(c *keeper.Config) {
	f := &fault.Store{}
	f.Wrap(c)
	s.Store = f.Store
	f.OnCreate(func(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
		w, err := next(ctx, key)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.step == nil || !strings.Contains(key, s.key) {
			return w, nil
		}
		step := s.step
		s.step = nil
		return &fault.Writer{Writer: w, OnCommit: func(ctx context.Context, commit func(context.Context) (store.Info, error)) (store.Info, error) {
			if err := step(ctx); err != nil {
				w.Abort()
				return store.Info{}, err
			}
			return commit(ctx)
		}}, nil
	})
}

// A keeper whose lease was taken over while it took a point (another
// keeper, whose clock runs ahead, judged it lapsed) and that took the same
// point meanwhile, is told by its failed commit that it lost the lease:
// it must not remove what is at the point's place then, which is the
// other keeper's committed point, not what it wrote.
func TestLostLeaseSnapshotLeavesTheOtherKeepersPoint(t *testing.T) {
	steps := &commitStepStore{}
	e := newEnv(t, func(c *keeper.Config) {
		steps.wrap(c)
		c.LeaseTTL = 600 * time.Millisecond // renewed every 200 ms
	})
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	other, err := e.keeperOnStore(steps.Store, func(c *keeper.Config) { c.Version, c.Now = "test", ahead })
	if err != nil {
		t.Fatal(err)
	}
	var otherErr error
	steps.mu.Lock()
	steps.key, steps.step = "points/"+module+"/"+local+"/f1-fp/bus.tar", func(ctx context.Context) error {
		// The other keeper takes the lapsed lease and the same point.
		if _, otherErr = other.SnapshotKept(e.ctx, req(1, "fp")); otherErr != nil {
			return nil
		}
		select {
		case <-ctx.Done(): // this keeper sees its lease lost
		case <-time.After(time.Minute):
			otherErr = errors.New("the verb did not see its lease lost within a minute")
		}
		return nil
	}
	steps.mu.Unlock()

	_, err = e.k.SnapshotKept(e.ctx, req(1, "fp"))
	if otherErr != nil {
		t.Fatalf("the other keeper's snapshot: %v", otherErr)
	}
	if err == nil {
		t.Fatal("a snapshot whose lease was lost was committed")
	}
	mustContain(t, err.Error(), "this keeper's point was not committed", "another keeper may write there now")
	if rep, err := other.VerifyKept(e.ctx, req(1, "fp")); err != nil {
		t.Fatalf("the other keeper's point after this one lost its lease: %v (%v)\nstore: %v", err, rep,
			keysUnder(t, steps.Store, "points/"))
	}
}
