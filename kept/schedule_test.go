package kept_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestScheduleNext walks cron specs and spans from chosen instants and
// checks the due times against ones worked out by hand.
func TestScheduleNext(t *testing.T) {
	cases := []struct {
		every, zone, from string
		want              []string // the next due times, in order
	}{
		{"6h", "", "2026-12-06T02:13:00Z", []string{"2026-12-06T06:00:00Z", "2026-12-06T12:00:00Z"}},
		{"90m", "", "2026-12-06T00:00:00Z", []string{"2026-12-06T01:30:00Z", "2026-12-06T03:00:00Z"}},
		{"1h30m", "", "2026-12-06T00:00:00Z", []string{"2026-12-06T01:30:00Z"}},
		{"0 3 * * *", "", "2026-12-06T02:13:00Z", []string{"2026-12-06T03:00:00Z", "2026-12-07T03:00:00Z"}},
		{"*/15 9-10 * * mon-fri", "", "2026-12-04T10:50:00Z", []string{"2026-12-07T09:00:00Z", "2026-12-07T09:15:00Z"}}, // Friday → Monday
		{"0 0 1,15 * *", "", "2026-12-06T00:00:00Z", []string{"2026-12-15T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"30 4 1 * 0", "", "2026-11-30T00:00:00Z", []string{"2026-12-01T04:30:00Z", "2026-12-06T04:30:00Z"}}, // day 1 or a Sunday
		{"0 12 * * 7", "", "2026-12-06T13:00:00Z", []string{"2026-12-13T12:00:00Z"}},                         // 7 is Sunday
		{"0 0 29 feb *", "", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z"}},
		{"@daily", "", "2026-12-06T00:00:00Z", []string{"2026-12-07T00:00:00Z"}},
		{"0 3 * * *", "Europe/Paris", "2026-12-06T00:00:00Z", []string{"2026-12-06T02:00:00Z"}}, // 03:00 CET
		{"0 3 * * *", "Europe/Paris", "2026-07-06T00:00:00Z", []string{"2026-07-06T01:00:00Z"}}, // 03:00 CEST
		// 02:30 does not happen in Paris on 29 March 2026: that day is skipped.
		{"30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z", []string{"2026-03-30T00:30:00Z"}},
	}
	for _, c := range cases {
		s, err := kept.ParseSchedule(c.every, c.zone)
		if err != nil {
			t.Fatalf("%q %q: %v", c.every, c.zone, err)
		}
		at := mustTime(t, c.from)
		for _, w := range c.want {
			next, ok := s.Next(at)
			if !ok || !next.Equal(mustTime(t, w)) {
				t.Fatalf("%q %q after %s: got %s (%v), want %s", c.every, c.zone, at, next.UTC(), ok, w)
			}
			if prev, ok := s.Prev(next); !ok || !prev.Equal(next) {
				t.Fatalf("%q %q: Prev(%s) = %s, want the due time itself", c.every, c.zone, next, prev)
			}
			at = next
		}
	}
}

// TestSchedulePrevAndInterval checks the last due time before an instant,
// the fingerprint it gives, and the interval an alert allows.
func TestSchedulePrevAndInterval(t *testing.T) {
	s, err := kept.ParseSchedule("15 */6 * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	now := mustTime(t, "2026-12-06T14:02:00Z")
	prev, ok := s.Prev(now)
	if !ok || !prev.Equal(mustTime(t, "2026-12-06T12:15:00Z")) {
		t.Fatalf("Prev = %s %v", prev, ok)
	}
	if fp := kept.ScheduledFingerprint(prev); fp != "sched-20261206T1215" {
		t.Fatalf("fingerprint %q", fp)
	}
	if got := s.Interval(now); got != 6*time.Hour {
		t.Fatalf("interval %s", got)
	}
	if _, ok := mustSchedule(t, "0 0 30 2 *").Next(now); ok {
		t.Fatal("30 February fell due")
	}
}

func mustSchedule(t *testing.T, every string) kept.Schedule {
	t.Helper()
	s, err := kept.ParseSchedule(every, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScheduleRefused: what ParseSchedule and Policy.Check refuse, each
// with a sentence naming the fault, wrapping ErrBadRequest.
func TestScheduleRefused(t *testing.T) {
	for _, c := range []struct{ every, zone, says string }{
		{"", "", "empty"},
		{"30s", "", "whole minutes"},
		{"6h", "Europe/Paris", "cron spec only"},
		{"0 3 * *", "", "5 fields"},
		{"60 * * * *", "", "minute \"60\""},
		{"0 24 * * *", "", "hour"},
		{"0 0 0 * *", "", "day-of-month"},
		{"0 0 * 13 *", "", "month"},
		{"0 0 * * 8", "", "day-of-week"},
		{"*/0 * * * *", "", "step"},
		{"5-1 * * * *", "", "backwards"},
		{"@fortnightly", "", "@hourly"},
		{"0 3 * * *", "Mars/Olympus", "IANA"},
	} {
		_, err := kept.ParseSchedule(c.every, c.zone)
		if err == nil || !errors.Is(err, kept.ErrBadRequest) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q %q: %v, want a bad request saying %q", c.every, c.zone, err, c.says)
		}
	}
	for _, p := range []kept.Policy{
		{Every: "6h"},                         // no keep rule
		{KeepLast: 3, Form: 2},                // a form without every
		{KeepLast: 3, TimeZone: "UTC"},        // a zone without every
		{KeepLast: 3, Every: "6h", Form: -1},  // a bad form
		{KeepLast: 3, Every: "every tuesday"}, // no schedule
	} {
		if err := p.Check(); !errors.Is(err, kept.ErrBadRequest) {
			t.Errorf("%+v: Check %v, want a bad request", p, err)
		}
	}
	p := kept.Policy{KeepLast: 24, Every: "0 * * * *", TimeZone: "Europe/Paris", Form: 2}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "keep-last 24, every 0 * * * * (Europe/Paris) at form 2"; got != want {
		t.Fatalf("String %q, want %q", got, want)
	}
}

// FuzzParseSchedule: whatever an operator writes, ParseSchedule answers
// without panicking, and a schedule it makes has no due time between
// Prev(t) and Next(t): Prev(t) <= t < Next(t) = Next(Prev(t)).
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"6h", "1d", "0 3 * * *", "*/15 9-17 * * mon-fri", "0 0 29 2 *", "@weekly", "1-5/2,7 * * jan-mar 0,7", "90m"} {
		f.Add(s, "", int64(1796000000))
	}
	f.Add("0 2 * * *", "Europe/Paris", int64(1774746000))
	f.Fuzz(func(t *testing.T, every, zone string, unix int64) {
		if zone != "" && zone != "UTC" && zone != "Europe/Paris" && zone != "America/New_York" {
			zone = "" // LoadLocation reads files; keep the fuzzer on the parser
		}
		s, err := kept.ParseSchedule(every, zone)
		if err != nil {
			if !errors.Is(err, kept.ErrBadRequest) {
				t.Fatalf("%q: error %v is not a bad request", every, err)
			}
			return
		}
		at := time.Unix(unix%(200*365*86400), 0).UTC() // within 1770..2170
		next, okN := s.Next(at)
		prev, okP := s.Prev(at)
		if okN && !next.After(at) {
			t.Fatalf("%q: Next(%s) = %s is not after it", every, at, next)
		}
		if okP && prev.After(at) {
			t.Fatalf("%q: Prev(%s) = %s is after it", every, at, prev)
		}
		if okP && okN {
			if n2, ok := s.Next(prev); !ok || !n2.Equal(next) {
				t.Fatalf("%q at %s: Next(Prev) = %s, Next = %s: a due time between them", every, at, n2, next)
			}
		}
	})
}
