package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// stuckPositions puts in front of c's bus the real bus but for
// SetPosition, which says it moved the consumer and did not.
func stuckPositions(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnSetPosition(func(context.Context, kept.Position, fault.SetPositionFunc) error { return nil })
}

// restoreOver takes a point of billing/ledger, changes the live data and
// restores the point over it with --json; it returns what was printed.
func restoreOver(t *testing.T, b *bed) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	var o outs
	if err := runSnapshot(ctx, snapshotOptions{Client: b.flags(), Out: o.output(), Module: "billing", Local: "ledger", Form: 1, Before: "fp"}); err != nil {
		t.Fatalf("snapshot-kept: %v", err)
	}
	if err := sample.Change(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	o = outs{}
	f := b.flags()
	f.JSON = true
	err := runRestore(ctx, restoreOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Form: 1, FormSet: true, Before: "fp", Why: "test"})
	return o.out.Bytes(), err
}

// TestEvidenceCommand: `nats-keeper evidence` prints the report of a good
// restore (all PASS) as summary.md, and with --json the reply whose evidence
// is the report; an id with no report exits 3.
func TestEvidenceCommand(t *testing.T) {
	b := newBed(t)
	out, err := restoreOver(t, b)
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	var rep kept.Reply
	if err := json.Unmarshal(out, &rep); err != nil || rep.Aside == nil || rep.Evidence == nil || rep.Evidence.Verdict != kept.Pass {
		t.Fatalf("restore --json printed %s (%v)", out, err)
	}
	id := rep.Aside.ID

	var o outs
	if err := runEvidence(context.Background(), evidenceOptions{Client: b.flags(), Out: o.output(), ID: id}); err != nil {
		t.Fatalf("evidence: %v", err)
	}
	mustContain(t, "evidence", o.out.String(), "PASS: all 7 checks passed", "# Restore evidence: PASS", id,
		"| the point verified before anything was touched | PASS |", "| the KV keys count as in the point | PASS |",
		"billing-events on SHARED_EVENTS", "## Steps")

	code, text, errText := runArgs(t, "evidence", id, "--json", "--server", b.url)
	var shown kept.Reply
	if code != 0 || json.Unmarshal([]byte(text), &shown) != nil || shown.Evidence == nil {
		t.Fatalf("evidence --json: exit %d, out %s, err %s", code, text, errText)
	}
	a, _ := json.Marshal(shown.Evidence)
	w, _ := json.Marshal(rep.Evidence)
	if string(a) != string(w) {
		t.Errorf("evidence --json printed another report:\n%s\nthe restore's:\n%s", a, w)
	}
	if code, _, errText := runArgs(t, "evidence", "billing.ledger.20200101T000000", "--server", b.url); code != exitNotFound {
		t.Errorf("evidence of no aside: exit %d (%s), want %d", code, errText, exitNotFound)
	}
	if code, _, _ := runArgs(t, "evidence", "../x", "--server", b.url); code != exitUsage {
		t.Errorf("evidence ../x: exit %d, want %d", code, exitUsage)
	}
}

// TestEvidenceOfAFailedRestoreThroughTheWire: a restore whose consumer was
// not set back fails with code 500, and --json prints the failure with its
// FAIL report; the report is then readable with `nats-keeper evidence`.
func TestEvidenceOfAFailedRestoreThroughTheWire(t *testing.T) {
	b := newBedWith(t, stuckPositions)
	out, err := restoreOver(t, b)
	var ve *verbs.Error
	if !errors.As(err, &ve) || ve.Code != verbs.CodeFailed || ve.Evidence == nil || ve.Evidence.Verdict != kept.Fail ||
		!errors.Is(err, kept.ErrFailed) || exitCode(err) != exitFailed {
		t.Fatalf("restore-kept: %T %v", err, err)
	}
	var body verbs.ErrorBody
	if err := json.Unmarshal(out, &body); err != nil || body.Code != verbs.CodeFailed || body.Evidence == nil ||
		len(body.Evidence.Failed) != 1 || body.Evidence.Failed[0] != kept.CheckConsumers {
		t.Fatalf("restore --json printed %s (%v)", out, err)
	}
	mustContain(t, "the failure", body.Error, "evidence fails", kept.CheckConsumers, "not undone", body.Evidence.Aside)
	code, text, errText := runArgs(t, "evidence", body.Evidence.Aside, "--server", b.url)
	if code != 0 {
		t.Fatalf("evidence: exit %d, %s", code, errText)
	}
	mustContain(t, "evidence", text, "# Restore evidence: FAIL", "| FAIL |")
}
