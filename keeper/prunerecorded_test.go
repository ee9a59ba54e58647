package keeper_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// PruneRecorded (serve --prune-every) does nothing without a recorded
// policy, nor with one only for a kept data that has no points (it used to
// fail there, refusing as if none were recorded); with the default recorded
// it prunes every kept data by it, and a kept data's own policy wins. Its
// acts are not by hand (they were).
func TestPruneRecorded(t *testing.T) {
	e := newEnv(t)
	for _, fp := range []string{"r1", "r2", "r3", "r4"} {
		e.snapshot(1, fp)
	}
	all := []string{"f1-r1", "f1-r2", "f1-r3", "f1-r4"}
	if rep, err := e.k.PruneRecorded(e.ctx); rep != nil || err != nil {
		t.Fatalf("with no policy recorded: %v, %v; want nothing", rep, err)
	}
	if err := e.k.SetPolicy(e.ctx, "other", "data", keeper.Policy{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	if rep, err := e.k.PruneRecorded(e.ctx); rep != nil || err != nil {
		t.Fatalf("with a policy only for a kept data without points: %v, %v; want nothing", rep, err)
	}
	if got := recordedPoints(t, e.dir); !slices.Equal(got, all) {
		t.Fatalf("points left: %v, want %v", got, all)
	}

	if err := e.k.SetPolicy(e.ctx, "", "", keeper.Policy{KeepLast: 3}); err != nil {
		t.Fatal(err)
	}
	if err := e.k.SetPolicy(e.ctx, module, local, keeper.Policy{KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	rep, err := e.k.PruneRecorded(e.ctx)
	if err != nil || rep == nil {
		t.Fatalf("with policies recorded: %v, %v", rep, err)
	}
	if got := recordedPoints(t, e.dir); !slices.Equal(got, []string{"f1-r3", "f1-r4"}) {
		t.Fatalf("points left after the scheduled prune: %v, want the newest two (its own policy, not the default's three): %s", got, rep.Said)
	}
	if rep.Said != "Pruned: 2 point(s) removed. billing/ledger by policy.billing.ledger (keep-last 2): 2 point(s) kept, 2 removed." {
		t.Errorf("said %q", rep.Said)
	}
	acts, err := e.js.Stream(e.ctx, "KEEPER_ACTS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := acts.GetLastMsgForSubject(e.ctx, "mesh-broker.acts."+keeper.VerbPrune)
	var act keeper.Act
	if err != nil || json.Unmarshal(m.Data, &act) != nil {
		t.Fatalf("the scheduled prune's last act: %v", err)
	}
	if act.Hand || act.Outcome != "done" || act.Caller != "nats-keeper serve --prune-every" {
		t.Errorf("the scheduled prune's act is %+v; want done, by nats-keeper serve --prune-every, not by hand", act)
	}
	// By hand, a kept data without points is refused with a sentence that
	// says so, not that no policy is recorded.
	_, err = e.k.PruneKept(e.ctx, keeper.Request{Module: "other", Local: "data", Caller: "t"})
	if !errors.Is(err, keeper.ErrBadRequest) || !strings.Contains(err.Error(), "other/data has no restore points") {
		t.Errorf("prune-kept of a kept data without points: %v", err)
	}
	p, key, err := e.k.PolicyOf(e.ctx, "other", "data")
	if err != nil || key != "policy.other.data" || p.KeepLast != 1 {
		t.Errorf("PolicyOf other/data: %v from %s, %v", p, key, err)
	}
	if p, key, err = e.k.PolicyOf(e.ctx, "nobody", "here"); err != nil || key != "policy.default" || p.KeepLast != 3 {
		t.Errorf("PolicyOf a kept data without its own: %v from %s, %v; want the default", p, key, err)
	}
}

// A policy is recorded only under plain names: bill.ing/ledger would be
// the key policy.bill.ing.ledger, which another kept data's could be.
func TestPolicyKeyNeedsPlainNames(t *testing.T) {
	for _, c := range [][2]string{{"bill.ing", "ledger"}, {"billing", "led.ger"}, {"billing", ""}, {"", "ledger"}, {"bill ing", "ledger"}} {
		if key, err := keeper.PolicyKey(c[0], c[1]); !errors.Is(err, keeper.ErrBadRequest) {
			t.Errorf("PolicyKey(%q, %q) = %q, %v; want a bad request", c[0], c[1], key, err)
		}
	}
	if key, err := keeper.PolicyKey("", ""); key != "policy.default" || err != nil {
		t.Errorf("PolicyKey of the default = %q, %v", key, err)
	}
}

// recordedPoints are billing/ledger's points under dir that have their
// record, sorted.
func recordedPoints(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "points", module, local))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range es {
		if _, err := os.Stat(filepath.Join(dir, "points", module, local, d.Name(), "point.json")); err == nil {
			out = append(out, d.Name())
		}
	}
	slices.Sort(out)
	return out
}

// A prune of a module that meets a kept data another verb holds stops there
// (409) and says what it removed before it, rather than that nothing was done.
func TestPruneStopsAtAHeldKeptData(t *testing.T) {
	e := newEnv(t)
	if err := sample.Create(e.ctx, e.js, module, "zz"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{local, "zz"} {
		for _, fp := range []string{"h1", "h2"} {
			r := req(1, fp)
			r.Local = l
			if _, err := e.k.SnapshotKept(e.ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := time.Now().UTC()
	held, _ := json.Marshal(map[string]any{"holder": "keeper-elsewhere", "verb": keeper.VerbRestore, "kept": module + "/zz",
		"caller": "ops-jane", "since": now, "expires": now.Add(time.Hour)})
	if _, err := e.bus.Create(e.ctx, "lease."+module+".zz", held); err != nil {
		t.Fatal(err)
	}
	_, err := e.k.PruneKept(e.ctx, keeper.Request{Module: module, Policy: &keeper.Policy{KeepLast: 1}, Caller: "t"})
	if !errors.Is(err, keeper.ErrBusy) {
		t.Fatalf("prune of the module: %v; want busy", err)
	}
	for _, want := range []string{"stopped at billing/zz after 1 point(s) were removed", "billing/ledger by the request (keep-last 1): 1 point(s) kept, 1 removed.", "keeper-elsewhere"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the busy sentence lacks %q: %v", want, err)
		}
	}
	if got := recordedPoints(t, e.dir); !slices.Equal(got, []string{"f1-h2"}) {
		t.Errorf("billing/ledger's points after the prune: %v, want f1-h2", got)
	}
}
