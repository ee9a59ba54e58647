package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
)

// TestPruneByCalendarOnRealProcesses takes points at chosen dates (the
// keeper's clock reads a file, NATS_KEEPER_TEST_CLOCK), records a policy of
// keep-within 2d, keep-weekly 2 and keep-monthly 2, and prunes three months
// after the newest point: keep-within counts from the newest point, not
// from now; the weeks run Monday to Sunday; a month's newest point stays;
// a point taken with --keep-for outlives every rule; the dry run lists
// every point with its rules, and the real prune removes exactly the
// points it listed, and never the aside.
func TestPruneByCalendarOnRealProcesses(t *testing.T) {
	const module, local = "dated", "ledger"
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "keeper")
	clock := filepath.Join(tmp, "clock")
	setClock := func(at string) {
		t.Helper()
		if err := os.WriteFile(clock, []byte(at+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setClock("2026-01-01T00:00:00Z")
	srv, nc, js, _ := keptOnProcs(t, tmp, module, local, "NATS_KEEPER_TEST_CLOCK="+clock)
	ctx := context.Background()
	cli := func(args ...string) string {
		t.Helper()
		_, out := mustCLI(t, tmp, srv.url(), args...)
		return out
	}

	taken := []struct{ fp, at string }{
		{"p1", "2026-01-10T10:00:00Z"},
		{"p2", "2026-02-03T09:00:00Z"}, // --keep-for 400d
		{"p3", "2026-02-20T12:00:00Z"}, // February's newest
		{"p4", "2026-03-01T08:00:00Z"}, // Sunday: the week of 23 February
		{"p5", "2026-03-01T20:00:00Z"},
		{"p6", "2026-03-05T10:00:00Z"}, // the newest of the week of 2 March
		{"p7", "2026-03-09T10:00:00Z"}, // Monday: within 2 days of the newest
		{"p8", "2026-03-10T10:00:00Z"}, // the newest
	}
	var keepUntil string
	for _, p := range taken {
		setClock(p.at)
		if p.fp != "p2" {
			mustCall(t, nc, "snapshot-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": p.fp, "caller": "e2e"})
			continue
		}
		held, _ := mustCLI(t, tmp, srv.url(), "snapshot-kept", module, local, "--form", "1", "--before", p.fp, "--keep-for", "400d", "--json")
		if held.Point == nil || held.Point.KeepUntil == nil || !strings.HasPrefix(held.Point.Taken.UTC().Format(time.RFC3339), "2026-02-03T09:00:0") {
			t.Fatalf("snapshot-kept at %s with --keep-for 400d: %+v", p.at, held.Point)
		}
		keepUntil = held.Point.KeepUntil.UTC().Format(time.RFC3339)
		if !strings.HasPrefix(keepUntil, "2027-03-10T09:00:0") {
			t.Fatalf("a point taken on 2026-02-03 with --keep-for 400d is kept until %s; want 2027-03-10", keepUntil)
		}
	}
	// A restore on the newest day leaves an aside, which prune never removes.
	setClock("2026-03-10T12:00:00Z")
	if err := sample.Change(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	mustCall(t, nc, "restore-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "p6", "why": "e2e", "caller": "e2e",
		"method": "full"}) // a whole aside: a delta's would keep its base point (p6) for a reason of its own
	aside := asides(t, dir)
	if len(aside) != 1 {
		t.Fatalf("after the restore the asides are %v; want one", aside)
	}

	cli("policy", "set", module, local, "--keep-within", "2d", "--keep-weekly", "2", "--keep-monthly", "2")
	setClock("2026-06-01T00:00:00Z") // long after the newest point
	want := map[string][]string{
		"p1": {"no rule keeps it"},
		"p2": {"keep-until " + keepUntil},
		"p3": {"keep-monthly 2026-02"},
		"p4": {"no rule keeps it"},
		"p5": {"no rule keeps it"},
		"p6": {"keep-weekly 2026-W10"},
		"p7": {"keep-within 2d"},
		"p8": {"newest", "keep-within 2d", "keep-weekly 2026-W11", "keep-monthly 2026-03"},
	}
	dry, _ := mustCLI(t, tmp, srv.url(), "prune", module, local, "--dry-run", "--json")
	if len(dry.Pruned) != len(want) {
		t.Fatalf("the dry run lists %d points; want %d: %s", len(dry.Pruned), len(want), dry.Said)
	}
	for _, d := range dry.Pruned {
		if w := want[d.Point.Fingerprint]; !slices.Equal(d.Reasons, w) || d.Keep != (w[0] != "no rule keeps it") {
			t.Errorf("the dry run says of %s (taken %s): keep %v, %q; want %q", d.Point.Fingerprint, d.Point.Taken.Format(time.RFC3339), d.Keep, d.Reasons, w)
		}
	}
	remove := removals(dry)
	if !slices.Equal(remove, []string{"p1", "p4", "p5"}) {
		t.Fatalf("the dry run removes %v; want p1, p4 and p5", remove)
	}
	if got := pointsUnder(t, dir, module, local); len(got) != len(taken) {
		t.Fatalf("the dry run removed points: %v left", got)
	}
	real, _ := mustCLI(t, tmp, srv.url(), "prune", module, local, "--json", "--why", "e2e calendar")
	if got := removals(real); !slices.Equal(got, remove) {
		t.Fatalf("the prune removed %v; the dry run listed %v", got, remove)
	}
	checkPruned(t, dir, nc, js, module, local, []string{"p2", "p3", "p6", "p7", "p8"}, remove)
	checkActs(t, js, module, local, remove, "e2e calendar")
	if got := asides(t, dir); !slices.Equal(got, aside) {
		t.Errorf("after the prune the asides are %v; want %v, untouched", got, aside)
	}
	if out := cli("prune", module, local, "--dry-run"); !strings.Contains(out, "5 point(s) kept, 0 removed.") {
		t.Errorf("a second prune would remove more:\n%s", out)
	}
}
