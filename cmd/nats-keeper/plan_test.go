package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-keeper/nats-keeper/kept"
)

// plan set, show and rm through the whole command line, against a real
// keeper: the plan is recorded and wins in the next snapshot, show prints
// it (and exits 3 without one), rm removes it, and the refusals exit 2.
func TestPlanSetShowRm(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	for _, name := range []string{"LEDGER_EVENTS", "LEDGER_AUDIT"} {
		if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}}); err != nil {
			t.Fatal(err)
		}
	}
	srv := []string{"--server", b.url}
	plan := func(args ...string) (int, string, string) {
		t.Helper()
		return runArgs(t, append(append([]string{"plan"}, args...), srv...)...)
	}

	if code, _, errText := plan("show", "billing", "ledger"); code != exitNotFound || !strings.Contains(errText, "no plan is recorded for billing/ledger") {
		t.Fatalf("show without a plan: exit %d, %s", code, errText)
	}
	code, out, errText := plan("set", "billing", "ledger", "LEDGER_EVENTS", "LEDGER_AUDIT", "--consumer", "LEDGER_EVENTS/feed")
	if code != 0 || !strings.Contains(out, "Recorded the plan of billing/ledger as plan.billing.ledger: 2 stream(s)") ||
		!strings.Contains(out, "stream    LEDGER_AUDIT") || !strings.Contains(out, "consumer  LEDGER_EVENTS/feed") {
		t.Fatalf("plan set: exit %d, out %q, err %s", code, out, errText)
	}
	code, out, _ = plan("show", "billing", "ledger", "--json")
	var rep kept.Reply
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.KeptPlan == nil ||
		strings.Join(rep.KeptPlan.Streams, ",") != "LEDGER_EVENTS,LEDGER_AUDIT" || len(rep.KeptPlan.Consumers) != 1 {
		t.Fatalf("plan show --json: exit %d, %s", code, out)
	}
	// The plan is what the keeper takes.
	code, out, errText = runArgs(t, "snapshot-kept", "billing", "ledger", "--form", "1", "--before", "fp", "--json", "--server", b.url)
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Point == nil || len(rep.Point.Streams) != 2 {
		t.Fatalf("snapshot-kept under the plan: exit %d, %s %s", code, out, errText)
	}

	// Refusals: exit 2, and the plan stays as it was.
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"set", "shop", "orders", "LEDGER_EVENTS"}, "another kept data, billing/ledger"},
		{[]string{"set", "shop", "orders", "KV_kept"}, "the keeper's own"},
		{[]string{"set", "shop", "orders", "KEEPER_ACTS"}, "the keeper's own"},
		{[]string{"set", "shop", "orders", "a.b"}, "not a stream or consumer name"},
		{[]string{"set", "shop", "orders", "X", "--consumer", "nope"}, "not STREAM/CONSUMER"},
		{[]string{"set", "shop", "orders"}, "plan takes set MODULE LOCAL STREAM"},
		{[]string{"show", "billing"}, "plan takes set"},
		{[]string{"set", "bill.ing", "ledger", "X"}, "module"},
	} {
		code, _, errText := plan(c.args...)
		if code != exitUsage || !strings.Contains(errText, c.says) {
			t.Errorf("plan %v: exit %d, want %d saying %q; stderr %s", c.args, code, exitUsage, c.says, errText)
		}
	}
	if code, _, errText := plan("show", "shop", "orders"); code != exitNotFound {
		t.Fatalf("a refused plan was recorded: exit %d, %s", code, errText)
	}

	if code, out, errText := plan("rm", "billing", "ledger"); code != 0 || !strings.Contains(out, "Removed the plan of billing/ledger") {
		t.Fatalf("plan rm: exit %d, %s %s", code, out, errText)
	}
	if code, _, _ := plan("show", "billing", "ledger"); code != exitNotFound {
		t.Fatalf("show after rm: exit %d", code)
	}
}
