package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
)

// policy set, show and rm through the whole command line: the default, a
// kept data's own policy that wins over it, show falling back to the
// default and naming the record it read, rm, and the refusals (exit 2).
func TestPolicySetShowRm(t *testing.T) {
	b := newBed(t)
	srv := []string{"--server", b.url}
	policy := func(args ...string) (int, string, string) {
		t.Helper()
		return runArgs(t, append(append([]string{"policy"}, args...), srv...)...)
	}
	mustRun := func(want string, args ...string) string {
		t.Helper()
		code, out, errText := policy(args...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("policy %v: exit %d, out %q (want %q), err %s", args, code, out, want, errText)
		}
		return out
	}

	if code, _, errText := policy("show", "billing", "ledger"); code != exitNotFound || !strings.Contains(errText, "policy.billing.ledger or policy.default") {
		t.Fatalf("show with nothing recorded: exit %d, %s", code, errText)
	}
	mustRun("Recorded policy.default: keep-last 3, keep-within 30d.", "set", "--keep-last", "3", "--keep-within", "30d")
	// A kept data without a policy of its own shows the default, and says so.
	mustRun("policy.default: keep-last 3, keep-within 30d", "show", "billing", "ledger")
	code, out, _ := policy("show", "billing", "ledger", "--json")
	var shown struct {
		Key    string      `json:"key"`
		Policy kept.Policy `json:"policy"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || shown.Key != "policy.default" ||
		shown.Policy != (kept.Policy{KeepLast: 3, KeepWithin: kept.Duration(30 * 24 * time.Hour)}) {
		t.Fatalf("show --json: exit %d, %q", code, out)
	}

	// Its own policy wins, and rm brings the default back.
	mustRun("Recorded policy.billing.ledger: keep-daily 7, keep-monthly 12.", "set", "billing", "ledger", "--keep-daily", "7", "--keep-monthly", "12")
	mustRun("policy.billing.ledger: keep-daily 7, keep-monthly 12", "show", "billing", "ledger")
	mustRun("policy.default: keep-last 3", "show")
	mustRun("Removed policy.billing.ledger", "rm", "billing", "ledger")
	if out := mustRun("policy.default:", "show", "billing", "ledger"); strings.Contains(out, "keep-daily") {
		t.Errorf("show after rm still shows the removed policy: %q", out)
	}
	mustRun("Removed policy.default", "rm")
	if code, _, errText := policy("show"); code != exitNotFound {
		t.Fatalf("show after rm of the default: exit %d, %s", code, errText)
	}

	// Refused, exit 2, and nothing recorded.
	for _, args := range [][]string{
		{"set", "billing", "ledger"}, // no --keep-* flag
		{"set"},                      // no --keep-* flag, for the default
		{"set", "billing", "ledger", "--keep-within", "3months"}, // months are refused
		{"set", "billing", "ledger", "--keep-within", "1y"},
		{"set", "billing", "ledger", "--keep-last", "-1"},
		{"set", "billing"}, // MODULE without LOCAL
		{"sett", "billing", "ledger", "--keep-last", "1"}, // not set, show or rm
		{"set", "bill.ing", "ledger", "--keep-last", "1"}, // not a plain name
	} {
		code, _, errText := policy(args...)
		if code != exitUsage || !strings.Contains(errText, "nats-keeper: ") {
			t.Errorf("policy %v: exit %d, want %d; stderr %s", args, code, exitUsage, errText)
		}
	}
	if _, _, errText := policy("set", "billing", "ledger", "--keep-within", "3months"); !strings.Contains(errText, "months or years") {
		t.Errorf("--keep-within 3months is refused without saying why: %s", errText)
	}
	if code, _, _ := policy("show", "billing", "ledger"); code != exitNotFound {
		t.Errorf("a refused set recorded a policy: show exits %d", code)
	}
}

// prune --dry-run lists every point with keep or remove and the rules
// that keep it, and removes nothing; the prune itself removes exactly what
// the dry run listed; with no policy given or recorded prune is refused,
// exit 2, and removes nothing.
func TestPruneCommand(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{"p1", "p2", "p3"} {
		var o outs
		if err := runSnapshot(ctx, snapshotOptions{Client: b.flags(), Out: o.output(), Module: "billing", Local: "ledger", Form: 1, Before: fp}); err != nil {
			t.Fatalf("snapshot-kept %s: %v", fp, err)
		}
		time.Sleep(10 * time.Millisecond) // distinct taken times
	}
	all := []string{"f1-p1", "f1-p2", "f1-p3"}
	srv := []string{"--server", b.url}

	code, out, errText := runArgs(t, append([]string{"prune", "billing", "ledger"}, srv...)...)
	if code != exitUsage || !strings.Contains(errText, "no policy") {
		t.Fatalf("prune with no policy anywhere: exit %d, out %s, err %s", code, out, errText)
	}
	if got := pointDirs(t, b.dir); !slices.Equal(got, all) {
		t.Fatalf("the refused prune removed points: %v left", got)
	}

	code, out, errText = runArgs(t, append([]string{"prune", "billing", "ledger", "--keep-last", "2", "--dry-run"}, srv...)...)
	if code != 0 {
		t.Fatalf("prune --dry-run: exit %d, %s", code, errText)
	}
	t.Logf("prune --dry-run printed:\n%s", out)
	mustContain(t, "prune --dry-run", out, "Dry run, nothing removed", "billing/ledger by the request (keep-last 2): 2 point(s) kept, 1 removed.",
		"DECISION", "WHY")
	for fp, want := range map[string]string{"p3": "keep newest, keep-last 2", "p2": "keep keep-last 2", "p1": "remove no rule keeps it"} {
		if line := lineWith(out, " "+fp+" "); !strings.Contains(squash(line), want) {
			t.Errorf("prune --dry-run: the line of %s is %q, want it to say %q\n%s", fp, line, want, out)
		}
	}
	if got := pointDirs(t, b.dir); !slices.Equal(got, all) {
		t.Fatalf("the dry run removed points: %v left", got)
	}

	code, out, errText = runArgs(t, append([]string{"prune", "billing", "ledger", "--keep-last", "2", "--why", "tidy", "--json"}, srv...)...)
	var rep kept.Reply
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !strings.HasPrefix(rep.Said, "Pruned: 1 point(s) removed.") || len(rep.Pruned) != 3 {
		t.Fatalf("prune --json: exit %d, out %s, err %s", code, out, errText)
	}
	if got := pointDirs(t, b.dir); !slices.Equal(got, []string{"f1-p2", "f1-p3"}) {
		t.Fatalf("after the prune these points are left: %v, want f1-p2 and f1-p3", got)
	}
}

// snapshot-kept --keep-for 1d puts keep-until, a day after taken, in the
// point; --keep-for 3months is refused, exit 2.
func TestSnapshotKeepFor(t *testing.T) {
	b := newBed(t)
	if err := sample.Create(context.Background(), b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	code, out, errText := runArgs(t, "snapshot-kept", "billing", "ledger", "--form", "1", "--before", "held", "--keep-for", "1d", "--json", "--server", b.url)
	var rep kept.Reply
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Point == nil {
		t.Fatalf("snapshot-kept --keep-for 1d: exit %d, out %s, err %s", code, out, errText)
	}
	if u := rep.Point.KeepUntil; u == nil || !u.Equal(rep.Point.Taken.Add(24*time.Hour)) {
		t.Fatalf("keep-until %v, want a day after taken %v", u, rep.Point.Taken)
	}
	data, err := os.ReadFile(filepath.Join(b.dir, "points", "billing", "ledger", "f1-held", "point.json"))
	var rec kept.Point
	if err != nil || json.Unmarshal(data, &rec) != nil || rec.KeepUntil == nil || !rec.KeepUntil.Equal(*rep.Point.KeepUntil) {
		t.Fatalf("point.json's keep-until is not the reply's %v (%v): %s", rep.Point.KeepUntil, err, data)
	}
	code, _, errText = runArgs(t, "snapshot-kept", "billing", "ledger", "--form", "1", "--before", "other", "--keep-for", "3months", "--server", b.url)
	if code != exitUsage {
		t.Fatalf("snapshot-kept --keep-for 3months: exit %d, %s", code, errText)
	}
}

// pointDirs are the points of billing/ledger under the keeper's dir that
// have their record, sorted.
func pointDirs(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "points", "billing", "ledger"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if _, err := os.Stat(filepath.Join(dir, "points", "billing", "ledger", e.Name(), "point.json")); err == nil {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// squash is s with every run of spaces one space.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// lineWith is the first line of s that contains sub.
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return strings.TrimRight(line, "\n")
		}
	}
	return ""
}
