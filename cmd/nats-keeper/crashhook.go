//go:build testhooks

// The test hooks of nats-keeper serve, read from the environment, in a
// binary built with -tags testhooks only: the tests that need them build the
// binary so (e2e, deploy/helmtest, this package's process tests). A release
// build has nohooks.go instead, whose hooks do nothing and name no variable;
// TestReleaseBuildHasNoTestHooks checks both builds.

package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// crashEnv names the restore step at which the keeper kills itself with
// SIGKILL. It exists only for crash tests, which prove that a keeper killed at
// any step recovers when it starts again; nothing else should set it.
const crashEnv = "NATS_KEEPER_CRASH_AT"

// holdEnv names the restore step at which the restore waits, its lease
// held, until the file holdUntilEnv names exists. It exists only for the
// test that proves a verb on kept data a restore holds is refused (409);
// nothing else should set it.
const (
	holdEnv      = "NATS_KEEPER_TEST_HOLD_AT"
	holdUntilEnv = "NATS_KEEPER_TEST_HOLD_UNTIL"
)

// crashHook returns the keeper's step hook: nil unless crashEnv, or
// holdEnv and holdUntilEnv, are set.
func crashHook(log *slog.Logger) func(string) {
	at, hold, until := os.Getenv(crashEnv), os.Getenv(holdEnv), os.Getenv(holdUntilEnv)
	if hold == "" || until == "" {
		hold = ""
	}
	if at == "" && hold == "" {
		return nil
	}
	if at != "" {
		log.Warn("crash test: the keeper will kill itself at a restore step", "step", at)
	}
	if hold != "" {
		log.Warn("hold test: a restore will wait at a step until a file exists", "step", hold, "file", until)
	}
	return func(step string) {
		if step == hold {
			log.Warn("hold test: the restore waits", "step", step, "file", until)
			for {
				if _, err := os.Stat(until); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			log.Warn("hold test: the restore goes on", "step", step)
		}
		if step == at {
			log.Warn("crash test: killing the keeper", "step", step)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}

// hangEnv names a verb that, for tests only, waits for its context to end
// before it does anything, and then fails: it exists only for the test that
// proves a stop with a stuck verb ends after --stop-timeout. Nothing else
// should set it.
const hangEnv = "NATS_KEEPER_TEST_HANG_VERB"

// hangHook returns the middleware that makes the verb hangEnv names hang,
// or nil (none) unless hangEnv is set.
func hangHook(log *slog.Logger) verbs.Middleware {
	verb := os.Getenv(hangEnv)
	if verb == "" {
		return nil
	}
	log.Warn("hang test: a verb will wait for its context to end", "verb", verb)
	h := &hangEngine{verb: verb, log: log}
	return func(v kept.Verb, next verbs.Handler) verbs.Handler {
		if v.Name != verb {
			return next
		}
		return func(ctx context.Context, r kept.Request) (*kept.Reply, error) {
			if err := h.hang(ctx, v.Name); err != nil {
				return nil, err
			}
			return next(ctx, r)
		}
	}
}

// hangEngine makes its verb wait for its context to end.
type hangEngine struct {
	verb string
	log  *slog.Logger
}

func (h *hangEngine) hang(ctx context.Context, verb string) error {
	if verb != h.verb {
		return nil
	}
	h.log.Warn("hang test: the verb waits for its context to end", "verb", verb)
	<-ctx.Done()
	return kept.Errorf(kept.ErrFailed, "hang test: %s waited for its context, which ended (%w), so nothing was done", verb, ctx.Err())
}

// clockEnv names a file that holds an RFC 3339 time: the keeper's clock
// then reads that time, plus what has passed since the file was last
// written. It exists only for the test that takes points at chosen dates
// and prunes them by calendar rules; nothing else should set it.
const clockEnv = "NATS_KEEPER_TEST_CLOCK"

// clockHook returns the keeper's clock: nil (the real one) unless clockEnv
// is set. A clock file that cannot be read gives the real time, and says so.
func clockHook(log *slog.Logger) func() time.Time {
	path := os.Getenv(clockEnv)
	if path == "" {
		return nil
	}
	log.Warn("clock test: the keeper's clock reads a file", "file", path)
	return func() time.Time {
		fi, err := os.Stat(path)
		if err != nil {
			log.Warn("clock test: the clock file cannot be read; the real time is used", "err", err)
			return time.Now()
		}
		data, err := os.ReadFile(path)
		if err != nil {
			log.Warn("clock test: the clock file cannot be read; the real time is used", "err", err)
			return time.Now()
		}
		at, err := time.Parse(time.RFC3339, strings.TrimSpace(string(data)))
		if err != nil {
			log.Warn("clock test: the clock file holds no RFC 3339 time; the real time is used", "err", err)
			return time.Now()
		}
		return at.Add(max(time.Since(fi.ModTime()), 0))
	}
}

// scheduleTickEnv names how often (a Go duration) the keeper looks for due
// scheduled points, instead of wiring.DefaultScheduleTick. It exists only
// for the test that drives a schedule with the test clock; nothing else
// should set it.
const scheduleTickEnv = "NATS_KEEPER_TEST_SCHEDULE_TICK"

// scheduleTickHook returns the schedule tick: 0 (the default) unless
// scheduleTickEnv holds a positive duration.
func scheduleTickHook(log *slog.Logger) time.Duration {
	d, err := time.ParseDuration(os.Getenv(scheduleTickEnv))
	if err != nil || d <= 0 {
		return 0
	}
	log.Warn("schedule test: the keeper looks for due points more often", "tick", d)
	return d
}
