package keeper_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// skipsSeen records what each census was asked to leave out.
type skipsSeen struct {
	mu    sync.Mutex
	skips [][]string
}

// wrap puts s in front of c's bus.
func (s *skipsSeen) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnCensus(func(ctx context.Context, q keeper.CensusQuery, next fault.CensusFunc) ([]string, []keeper.Position, error) {
		s.mu.Lock()
		s.skips = append(s.skips, slices.Clone(q.Skip))
		s.mu.Unlock()
		return next(ctx, q)
	})
}

// TestPositionsOnTheKeptStreamsComeFromTheirSnapshots: the census before a
// snapshot leaves the kept streams out, and the point records the positions
// of the module's consumers on them as their snapshots hold them: the same
// ack floor and the same configuration, byte for byte, as the server lists
// while nothing moves; those on another stream come from the census.
func TestPositionsOnTheKeptStreamsComeFromTheirSnapshots(t *testing.T) {
	seen := &skipsSeen{}
	e := newEnv(t, seen.wrap)
	e.change() // the consumers stand part-way
	rep := e.snapshot(1, "carried")

	kept := []string{e.names.KVStream, e.names.ObjStrm, e.names.Stream}
	if len(seen.skips) == 0 {
		t.Fatal("no census was taken")
	}
	for _, s := range kept {
		if !slices.Contains(seen.skips[0], s) {
			t.Errorf("the census before the snapshot did not leave out kept stream %s (it left out %v)", s, seen.skips[0])
		}
	}
	listed, err := e.bus.Consumers(e.ctx, []string{e.names.Stream, sample.SharedStream})
	if err != nil {
		t.Fatal(err)
	}
	onKept, onShared := 0, 0
	for _, p := range rep.Point.Positions {
		i := slices.IndexFunc(listed, func(l keeper.Position) bool { return l.Stream == p.Stream && l.Consumer == p.Consumer })
		if i < 0 {
			t.Errorf("the point records %s on %s, which the server does not list", p.Consumer, p.Stream)
			continue
		}
		if p.AckFloor != listed[i].AckFloor || !bytes.Equal(p.Config, listed[i].Config) {
			t.Errorf("%s on %s: recorded at %d with config %s; the server lists %d with %s",
				p.Consumer, p.Stream, p.AckFloor, p.Config, listed[i].AckFloor, listed[i].Config)
		}
		if p.Stream == e.names.Stream {
			onKept++
		} else {
			onShared++
		}
	}
	if onKept != 2 || onShared != 1 {
		t.Errorf("the point records %d position(s) on the kept stream and %d on the shared one, want 2 and 1", onKept, onShared)
	}
}
