package keeper_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// commitStepStore runs a test's step before the commit of a write whose
// key holds a substring. For injecting faults (a race) only.
type commitStepStore struct {
	store.Store
	mu   sync.Mutex
	key  string
	step func(ctx context.Context) error
}

func (s *commitStepStore) Create(ctx context.Context, key string) (store.Writer, error) {
	w, err := s.Store.Create(ctx, key)
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
	return &stepWriter{Writer: w, step: step}, nil
}

type stepWriter struct {
	store.Writer
	step func(ctx context.Context) error
}

func (w *stepWriter) Commit(ctx context.Context) (store.Info, error) {
	if err := w.step(ctx); err != nil {
		w.Writer.Abort()
		return store.Info{}, err
	}
	return w.Writer.Commit(ctx)
}

// A keeper whose lease was taken over while it took a point (another
// keeper, whose clock runs ahead, judged it lapsed) and that took the same
// point meanwhile, is told by its failed commit that it lost the lease:
// it must not remove what is at the point's place then, which is the
// other keeper's committed point, not what it wrote.
func TestLostLeaseSnapshotLeavesTheOtherKeepersPoint(t *testing.T) {
	steps := &commitStepStore{}
	e := newEnv(t, func(c *keeper.Config) {
		steps.Store = c.Store
		c.Store = steps
		c.LeaseTTL = 600 * time.Millisecond // renewed every 200 ms
	})
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	other, err := keeper.New(e.ctx, keeper.Config{Store: steps.Store, Bus: e.bus, Index: e.bus, Acts: e.bus, Version: "test",
		Now: ahead, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
