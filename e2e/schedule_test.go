package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScheduleOnRealProcesses records a policy of every hour with
// keep-last 2 and moves two keepers' clock (NATS_KEEPER_TEST_CLOCK) over
// three due times: each due point is taken once across the two keepers
// (one snapshot-kept act each, no replaced point set aside, one keeper's
// log says it took it), with form 1 and fingerprint sched-<due, UTC>, and
// the third point prunes the first by the policy; list shows the next due
// time.
func TestScheduleOnRealProcesses(t *testing.T) {
	const module, local = "timed", "ledger"
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "keeper")
	clock := filepath.Join(tmp, "clock")
	setClock := func(at string) {
		t.Helper()
		if err := os.WriteFile(clock, []byte(at+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setClock("2026-12-06T01:40:00Z")
	srv, nc, js := sampleOnProc(t, tmp, module, local)
	env := []string{"NATS_KEEPER_TEST_CLOCK=" + clock, "NATS_KEEPER_TEST_SCHEDULE_TICK=200ms"}
	a := startKeeper(t, srv.url(), dir, tmp, env...)
	b := startKeeper(t, srv.url(), dir, tmp, env...)
	waitKeepers(t, nc, 2, a, b)

	mustCLI(t, tmp, srv.url(), "policy", "set", module, local, "--every", "0 * * * *", "--form", "1", "--keep-last", "2")
	waitPoints := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !slices.Equal(pointsUnder(t, dir, module, local), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the points are %v; want %v\n%s\n----\n%s", pointsUnder(t, dir, module, local), want,
					tail(a.p.log.String()), tail(b.p.log.String()))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A new schedule takes its latest due point at once.
	waitPoints("sched-20261206T0100")
	setClock("2026-12-06T02:00:05Z")
	waitPoints("sched-20261206T0100", "sched-20261206T0200")
	setClock("2026-12-06T03:00:05Z")
	waitPoints("sched-20261206T0200", "sched-20261206T0300") // keep-last 2 removed 01:00

	// The point is in place before its keeper logs it, and prunes.
	tookLogs := func() int {
		return strings.Count(a.p.log.String()+b.p.log.String(), `"msg":"took a scheduled point"`)
	}
	for deadline := time.Now().Add(time.Minute); tookLogs() < 3 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	taken := map[string]int{}
	for _, act := range allActs(t, js, "snapshot-kept") {
		if act.Caller == "nats-keeper schedule" && act.Outcome == "done" {
			due, _ := strings.CutPrefix(act.Why, "due at ")
			taken[strings.Fields(due + " ?")[0]]++
		}
	}
	for _, due := range []string{"2026-12-06T01:00:00Z", "2026-12-06T02:00:00Z", "2026-12-06T03:00:00Z"} {
		if taken[due] != 1 {
			t.Errorf("the point due at %s was taken %d times by the two keepers; want once (acts: %v)", due, taken[due], taken)
		}
	}
	if n := len(taken); n != 3 {
		t.Errorf("scheduled points were taken for %d due times; want 3: %v", n, taken)
	}
	if n := tookLogs(); n != 3 {
		t.Errorf("the two keepers' logs say %d times that they took a scheduled point; want 3", n)
	}
	if got := asides(t, dir); len(got) != 0 {
		t.Errorf("a due point taken twice set the first aside as replaced: asides %v", got)
	}
	pruned := 0
	for _, act := range allActs(t, js, "prune-kept") {
		if act.Outcome == "done" && strings.Contains(act.What, "sched-20261206T0100") {
			pruned++
		}
	}
	if pruned != 1 {
		t.Errorf("the prune of sched-20261206T0100 by keep-last 2 was recorded %d times; want once", pruned)
	}
	_, out := mustCLI(t, tmp, srv.url(), "list", module, local)
	if !strings.Contains(out, "Scheduled points") || !strings.Contains(out, "2026-12-06 04:00Z") || !strings.Contains(out, "sched-20261206T0400") {
		t.Errorf("list does not show the next due time 04:00 and its fingerprint:\n%s", out)
	}
}
