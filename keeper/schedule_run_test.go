package keeper_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestScheduledPointsTakenOnceAndFailed drives a schedule with the
// keeper's clock: list-kept shows the due and next due times; the due
// point is taken with the policy's form and fingerprint sched-<due, UTC>,
// a second keeper then finds it taken; a scheduled kept data that is not on
// the bus fails with a schedule act of outcome failed.
func TestScheduledPointsTakenOnceAndFailed(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 7, 0, 0, time.UTC)
	clock := func(c *keeper.Config) { c.Now = func() time.Time { return now } }
	e := newEnv(t, clock)
	p := keeper.Policy{KeepLast: 2, Every: "0 */2 * * *", Form: 4}
	if err := e.k.SetPolicy(e.ctx, module, local, p); err != nil {
		t.Fatal(err)
	}
	rep, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil || len(rep.Schedules) != 1 {
		t.Fatalf("list-kept: %v %+v", err, rep)
	}
	s := rep.Schedules[0]
	if !s.Due.Equal(time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)) || !s.NextDue.Equal(time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)) ||
		s.Taken || s.Policy != "policy.billing.ledger" || s.Interval != 2*time.Hour || s.Fingerprint() != "sched-20261206T0200" {
		t.Fatalf("the schedule: %+v", s)
	}
	if taken, err := e.k.TakeScheduled(e.ctx, s); !taken || err != nil {
		t.Fatalf("TakeScheduled: %v %v", taken, err)
	}
	second, err := e.keeperOn(e.dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	if taken, err := second.TakeScheduled(e.ctx, s); taken || err != nil {
		t.Fatalf("a second keeper took the same due point again: %v %v", taken, err)
	}
	if got := recordedPoints(t, e.dir); !slices.Equal(got, []string{"f4-sched-20261206T0200"}) {
		t.Fatalf("points: %v", got)
	}
	scheds, err := second.Schedules(e.ctx, "", "")
	if err != nil || len(scheds) != 1 || !scheds[0].Taken || scheds[0].Newest == nil {
		t.Fatalf("after the take: %v %+v", err, scheds)
	}

	if err := e.k.SetPolicy(e.ctx, "gone", "data", p); err != nil {
		t.Fatal(err)
	}
	scheds, err = e.k.Schedules(e.ctx, "gone", "")
	if err != nil || len(scheds) != 1 {
		t.Fatalf("schedules of gone: %v %+v", err, scheds)
	}
	_, err = e.k.TakeScheduled(e.ctx, scheds[0])
	if !errors.Is(err, keeper.ErrNotFound) || !strings.Contains(err.Error(), "the scheduled point gone/data f4-sched-20261206T0200") {
		t.Fatalf("a scheduled point of kept data not on the bus: %v", err)
	}
	var failed []keeper.Act
	for _, a := range jstest.StoredActs(t, e.js, "KEEPER_ACTS") {
		if a.Verb == keeper.VerbSchedule {
			failed = append(failed, a)
		}
	}
	if len(failed) != 1 || failed[0].Outcome != "failed" || failed[0].Module != "gone" || !strings.Contains(failed[0].What, "was not taken") {
		t.Fatalf("the schedule acts: %+v", failed)
	}
}
