package keeper_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestSlowSampleDoesNotHoldTheWindow: a census that does not answer (held
// by the test, as a bus whose consumers keep changing holds it) holds no
// capture round. The window reaches past messages written meanwhile, and
// the segment that holds them carries the last sample committed, with that
// sample's time. Once the census answers, a later segment takes a sample
// made after it.
func TestSlowSampleDoesNotHoldTheWindow(t *testing.T) {
	f := &fault.Bus{}
	e := newEnv(t, f.Wrap)
	stop := e.captureOn()
	defer stop()
	e.captureReaches(time.Now())
	before := readSegmentRecords(t, e.dir)
	if len(before) == 0 || before[len(before)-1].PositionsAt.IsZero() {
		t.Fatalf("the capture committed no sample before the test held the census: %+v", before)
	}
	lastSample := before[len(before)-1].PositionsAt

	release := make(chan struct{})
	var held atomic.Int32
	f.OnCensus(func(ctx context.Context, q keeper.CensusQuery, next fault.CensusFunc) ([]string, []keeper.Position, error) {
		held.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return next(ctx, q)
	})
	for j := range 3 {
		if _, err := e.js.Publish(e.ctx, fmt.Sprintf("%s.%s.orders.held", module, local), fmt.Appendf(nil, "while the census is held %d", j)); err != nil {
			t.Fatal(err)
		}
	}
	e.captureReaches(time.Now())
	if held.Load() == 0 {
		t.Fatal("no census was asked while it was held: the test holds nothing")
	}
	recs := readSegmentRecords(t, e.dir)
	var carried bool
	for _, r := range recs[len(before):] {
		if !r.PositionsAt.Equal(lastSample) {
			t.Errorf("segment %d, committed while the census was held, has a sample of %s; the last one committed was of %s", r.N, r.PositionsAt, lastSample)
		}
		for _, ss := range r.Streams {
			carried = carried || (ss.Name == e.names.Stream && ss.Messages > 0)
		}
	}
	if !carried {
		t.Fatalf("no segment committed while the census was held holds the messages written then: %+v", recs[len(before):])
	}

	released := time.Now()
	close(release)
	f.OnCensus(nil)
	// A message each round, so that each round commits a segment: the one
	// after the census answered may still carry the last sample (the sample
	// under way is taken once it is done, not waited for).
	deadline := time.Now().Add(30 * time.Second)
	for j := 0; ; j++ {
		if _, err := e.js.Publish(e.ctx, fmt.Sprintf("%s.%s.orders.after", module, local), fmt.Appendf(nil, "after the census answered %d", j)); err != nil {
			t.Fatal(err)
		}
		e.captureReaches(time.Now())
		recs = readSegmentRecords(t, e.dir)
		if last := recs[len(recs)-1]; last.PositionsAt.After(released) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the census answered, the newest segment %d still has a sample of %s", recs[len(recs)-1].N, recs[len(recs)-1].PositionsAt)
		}
	}
}
