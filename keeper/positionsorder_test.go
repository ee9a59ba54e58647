package keeper_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// moveOnSnapshot is the real bus whose first snapshot first moves the
// module's consumers on (sample.Change: acknowledgements on the shared
// stream among them), and whose census waits up to censusWait for a
// snapshot to have begun: a census read beside the snapshot would then see
// the consumers moved.
type moveOnSnapshot struct {
	move  func()
	once  sync.Once
	begun chan struct{}
}

const censusWait = 300 * time.Millisecond

// wrap puts m in front of c's bus.
func (m *moveOnSnapshot) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnCensus(func(ctx context.Context, q keeper.CensusQuery, next fault.CensusFunc) ([]string, []keeper.Position, error) {
		select {
		case <-m.begun:
		case <-time.After(censusWait):
		}
		return next(ctx, q)
	})
	f.OnSnapshot(func(ctx context.Context, stream string, data, meta io.WriteCloser, next fault.SnapshotFunc) error {
		m.once.Do(func() {
			m.move()
			close(m.begun)
		})
		return next(ctx, stream, data, meta)
	})
}

// The positions are read before any stream is snapshotted (README, order
// of steps): a consumer on another stream that moves during the snapshot is
// recorded where it was, so a restore makes it hear the events since again
// instead of skipping events whose effects the point does not hold.
func TestPositionsAreReadBeforeTheSnapshot(t *testing.T) {
	m := &moveOnSnapshot{begun: make(chan struct{})}
	e := newEnv(t, m.wrap)
	floor := func() uint64 {
		t.Helper()
		c, err := e.js.Consumer(e.ctx, sample.SharedStream, e.names.Events)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.AckFloor.Stream
	}
	before := floor()
	m.move = func() {
		if err := sample.Change(e.ctx, e.js, module, local); err != nil {
			t.Error(err)
		}
	}
	rep := e.snapshot(1, "order")
	if after := floor(); after <= before {
		t.Fatalf("the consumer %s did not move during the snapshot (ack floor %d, then %d)", e.names.Events, before, after)
	}
	for _, p := range rep.Point.Positions {
		if p.Stream == sample.SharedStream && p.Consumer == e.names.Events {
			if p.AckFloor != before {
				t.Errorf("the point records %s at ack floor %d, want %d, where it was before the snapshot", p.Consumer, p.AckFloor, before)
			}
			return
		}
	}
	t.Errorf("the point records no position of %s; it has %+v", e.names.Events, rep.Point.Positions)
}
