package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
)

// TestPruneOnRealProcesses runs a nats-server and `nats-keeper serve`, and
// the nats-keeper CLI against them. Four points and a restore (an aside);
// policy set keep-last 2; prune --dry-run lists what prune removes, and the
// prune removes exactly that, files and index, each removal an act first,
// and never the aside; a point taken with --keep-for 1d outlives a
// keep-last 1 prune and says keep-until. A prune while a restore of the
// same kept data is in flight gets 409 and removes nothing. serve
// --prune-every 1m applies the recorded policy by itself.
func TestPruneOnRealProcesses(t *testing.T) {
	const module, local = "pruned", "ledger"
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "keeper")
	srv, nc, js, k := keptOnProcs(t, tmp, module, local)
	ctx := context.Background()
	snapshot := func(fp string) {
		t.Helper()
		mustCall(t, nc, "snapshot-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": fp, "caller": "e2e"})
	}
	restore := func(fp string) reply {
		if err := sample.Change(ctx, js, module, local); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"module": module, "local": local, "form": 1, "fingerprint": fp, "why": "e2e", "caller": "e2e",
			"method": "full"}) // a whole aside: a delta's would keep its base point from the prune
		return call(ctx, nc, "restore-kept", body, 10*time.Minute)
	}
	cli := func(args ...string) (*kept.Reply, string) {
		t.Helper()
		return mustCLI(t, tmp, srv.url(), args...)
	}
	points := func() []string { return pointsUnder(t, dir, module, local) }

	for _, fp := range []string{"p1", "p2", "p3", "p4"} {
		snapshot(fp)
	}
	if r := restore("p2"); r.Err != nil || r.Code != 200 {
		t.Fatalf("restore-kept of f1-p2: %s", r)
	}
	aside := asides(t, dir)
	if len(aside) != 1 {
		t.Fatalf("after the restore the asides are %v; want one", aside)
	}

	if _, out := cli("policy", "set", module, local, "--keep-last", "2"); !strings.Contains(out, "Recorded policy."+module+"."+local+": keep-last 2.") {
		t.Errorf("policy set said %q", out)
	}
	dry, _ := cli("prune", module, local, "--dry-run", "--json")
	remove := removals(dry)
	if !slices.Equal(remove, []string{"p1", "p2"}) || len(dry.Pruned) != 4 {
		t.Fatalf("the dry run of keep-last 2 lists %v for removal out of %d; want p1 and p2 of 4: %s", remove, len(dry.Pruned), dry.Said)
	}
	if got := points(); !slices.Equal(got, []string{"p1", "p2", "p3", "p4"}) {
		t.Fatalf("the dry run removed points: %v left", got)
	}
	real, _ := cli("prune", module, local, "--json", "--why", "e2e retention")
	if got := removals(real); !slices.Equal(got, remove) {
		t.Fatalf("the prune removed %v; the dry run listed %v", got, remove)
	}
	checkPruned(t, dir, nc, js, module, local, []string{"p3", "p4"}, remove)
	if got := asides(t, dir); !slices.Equal(got, aside) || asideReason(t, dir, aside[0]) != "restore" {
		t.Errorf("after the prune the asides are %v; want %v, untouched", got, aside)
	}
	checkActs(t, js, module, local, remove, "e2e retention")

	// A point taken with --keep-for 1d outlives a keep-last 1 prune.
	held, _ := cli("snapshot-kept", module, local, "--form", "1", "--before", "held", "--keep-for", "1d", "--json")
	if held.Point == nil || held.Point.KeepUntil == nil {
		t.Fatalf("snapshot-kept --keep-for 1d: no keep-until in %+v", held.Point)
	}
	snapshot("p5")
	last1, _ := cli("prune", module, local, "--keep-last", "1", "--json")
	if got := removals(last1); !slices.Equal(got, []string{"p3", "p4"}) {
		t.Errorf("keep-last 1 removed %v; want p3 and p4", got)
	}
	wantReason := "keep-until " + held.Point.KeepUntil.UTC().Format(time.RFC3339)
	for _, d := range last1.Pruned {
		if d.Point.Fingerprint == "held" && (!d.Keep || !slices.Contains(d.Reasons, wantReason)) {
			t.Errorf("the point taken with --keep-for 1d: keep %v, reasons %v; want kept with %q", d.Keep, d.Reasons, wantReason)
		}
	}
	checkPruned(t, dir, nc, js, module, local, []string{"held", "p5"}, []string{"p3", "p4"})
	checkActs(t, js, module, local, []string{"p3", "p4"}, "")

	// A prune while a restore of the same kept data is in flight: 409.
	k.p.stop(t, syscall.SIGTERM, time.Minute)
	release := filepath.Join(tmp, "release-the-restore")
	h := startKeeper(t, srv.url(), dir, tmp, "NATS_KEEPER_TEST_HOLD_AT=journal-written", "NATS_KEEPER_TEST_HOLD_UNTIL="+release)
	waitKeepers(t, nc, 1, h)
	restored := make(chan reply, 1)
	go func() { restored <- restore("p5") }()
	waitLog(t, h, "hold test: the restore waits", time.Minute)
	before := bucketEntries(t, js, "kept")
	body, _ := json.Marshal(map[string]any{"module": module, "local": local, "policy": map[string]any{"keep-last": 1}, "caller": "e2e"})
	if r := call(ctx, nc, "prune-kept", body, time.Minute); r.Err != nil || r.Code != 409 || !strings.Contains(r.Said, "restore-kept") {
		t.Errorf("prune-kept during a restore: %s; want 409 naming restore-kept", r)
	} else {
		t.Logf("prune-kept during a restore: %s", r)
	}
	if code, _, errText := runCLI(t, tmp, "prune", module, local, "--server", srv.url()); code != 4 { // exit 4: busy (README, Exit codes)
		t.Errorf("nats-keeper prune during a restore: exit %d, want 4: %s", code, errText)
	}
	if got := points(); !slices.Equal(got, []string{"held", "p5"}) {
		t.Errorf("the refused prunes removed points: %v left", got)
	}
	if d := pointRecords(before, bucketEntries(t, js, "kept")); d != "" {
		t.Errorf("the refused prunes changed the index's points:\n%s", d)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := <-restored; r.Err != nil || r.Code != 200 {
		t.Fatalf("the held restore-kept of f1-p5: %s\n%s", r, tail(h.p.log.String()))
	}

	// serve --prune-every 1m applies policy.<module>.<local> (keep-last 2).
	h.p.stop(t, syscall.SIGTERM, time.Minute)
	start := time.Now()
	s := startKeeperArgs(t, srv.url(), dir, tmp, []string{"--prune-every", "1m"})
	waitKeepers(t, nc, 1, s)
	snapshot("p6")
	snapshot("p7")
	for !slices.Equal(points(), []string{"held", "p6", "p7"}) {
		if time.Since(start) > 100*time.Second {
			t.Fatalf("serve --prune-every 1m had not pruned after %s: points %v\n%s", time.Since(start).Round(time.Second), points(), tail(s.p.log.String()))
		}
		time.Sleep(time.Second)
	}
	// The point's record goes first; the keeper logs the prune once it has
	// removed the rest and recorded its acts.
	waitLog(t, s, "the scheduled prune ran", time.Minute)
	t.Logf("serve --prune-every 1m pruned f1-p5 %s after the keeper started", time.Since(start).Round(time.Second))
	checkPruned(t, dir, nc, js, module, local, []string{"held", "p6", "p7"}, []string{"p5"})
	checkActs(t, js, module, local, []string{"p5"}, "the recorded retention policies, on schedule")
	if !strings.Contains(s.p.log.String(), "the scheduled prune ran") {
		t.Errorf("the keeper did not log the scheduled prune:\n%s", tail(s.p.log.String()))
	}
	if got := asides(t, dir); len(got) != 2 || !slices.Contains(got, aside[0]) {
		t.Errorf("the asides are %v; want the first restore's %s and the held restore's", got, aside[0])
	}
}
