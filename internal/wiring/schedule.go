package wiring

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/metrics"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// DefaultScheduleTick is how often a serving keeper looks for scheduled
// points that fell due (policies with every).
const DefaultScheduleTick = 20 * time.Second

// maxScheduleAttempts bounds how often one keeper tries one due point that
// fails; the next due time is tried afresh.
const maxScheduleAttempts = 3

// scheduler takes the due points of the recorded schedules, one pass every
// tick, and keeps the schedule metrics.
type scheduler struct {
	k        *keeper.Keeper
	m        *metrics.Schedules
	log      *slog.Logger
	attempts map[string]int // kept data and fingerprint of a due point that failed → tries
}

func scheduleLoop(ctx context.Context, k *keeper.Keeper, tick time.Duration, m *metrics.Schedules, log *slog.Logger) {
	s := &scheduler{k: k, m: m, log: log, attempts: map[string]int{}}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		s.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass takes every due point not yet taken, then sets the gauges.
func (s *scheduler) pass(ctx context.Context) {
	scheds, err := s.k.Schedules(ctx, "", "")
	if err != nil {
		s.log.Warn("the schedules could not be read; trying again at the next tick", "err", err)
		return
	}
	current := map[string]bool{}
	took := false
	for _, sc := range scheds {
		key := sc.Module + "/" + sc.Local + "/" + sc.Fingerprint()
		current[key] = true
		if sc.Taken || sc.Due.IsZero() || s.attempts[key] >= maxScheduleAttempts {
			continue
		}
		taken, err := s.k.TakeScheduled(ctx, sc)
		switch {
		case errors.Is(err, keeper.ErrScheduleHeld):
			s.log.Debug("another keeper is taking a scheduled point", "kept", sc.Module+"/"+sc.Local, "fingerprint", sc.Fingerprint())
		case err != nil && ctx.Err() == nil:
			s.attempts[key]++
			s.m.Point(sc.Module, sc.Local, metrics.ScheduleFailed)
			s.log.Error("a scheduled point failed", "kept", sc.Module+"/"+sc.Local, "fingerprint", sc.Fingerprint(),
				"attempt", s.attempts[key], "of", maxScheduleAttempts, "err", err)
		case taken:
			took = true
			s.m.Point(sc.Module, sc.Local, metrics.ScheduleTaken)
			s.log.Info("took a scheduled point", "kept", sc.Module+"/"+sc.Local, "form", sc.Form, "fingerprint", sc.Fingerprint())
		}
	}
	for key := range s.attempts {
		if !current[key] {
			delete(s.attempts, key)
		}
	}
	if took {
		if scheds, err = s.k.Schedules(ctx, "", ""); err != nil {
			return
		}
	}
	s.m.Seen(scheds)
}
