package keeper_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

func planReq(l string, streams ...string) keeper.Request {
	return keeper.Request{Module: module, Local: l, Streams: streams, Caller: "test", Why: "testing"}
}

// set-plan records the plan, show-plan returns it, remove-plan removes it
// and the naming rule applies again.
func TestPlanSetShowRemove(t *testing.T) {
	e := newEnv(t)
	if _, err := e.k.ShowPlan(e.ctx, planReq(local)); !errors.Is(err, keeper.ErrNotFound) || !strings.Contains(err.Error(), "KV_billing_ledger") {
		t.Fatalf("show-plan before a plan: %v", err)
	}
	r := planReq(local, e.names.Stream)
	r.Consumers = []keeper.PlanConsumer{{Stream: "SHARED", Consumer: "odd-name"}}
	rep, err := e.k.SetPlan(e.ctx, r)
	if err != nil || rep.KeptPlan == nil || len(rep.KeptPlan.Streams) != 1 || !strings.Contains(rep.Said, "plan.billing.ledger") {
		t.Fatalf("set-plan: %+v, %v", rep, err)
	}
	rep, err = e.k.ShowPlan(e.ctx, planReq(local))
	if err != nil || rep.KeptPlan == nil || rep.KeptPlan.Streams[0] != e.names.Stream || len(rep.KeptPlan.Consumers) != 1 ||
		rep.KeptPlan.Module != module || rep.KeptPlan.Local != local {
		t.Fatalf("show-plan: %+v, %v", rep, err)
	}
	if got := e.snapshot(1, "planned").Point.Streams; len(got) != 1 || got[0].Name != e.names.Stream {
		t.Fatalf("the point under the plan holds %+v", got)
	}
	if rep, err = e.k.RemovePlan(e.ctx, planReq(local)); err != nil || !strings.HasPrefix(rep.Said, "Removed the plan") {
		t.Fatalf("remove-plan: %+v, %v", rep, err)
	}
	if _, err := e.k.ShowPlan(e.ctx, planReq(local)); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("show-plan after remove-plan: %v", err)
	}
	if got := e.snapshot(1, "named").Point.Streams; len(got) < 2 {
		t.Fatalf("without the plan the naming rule should find all the kept data's streams, found %+v", got)
	}
	if rep, err = e.k.RemovePlan(e.ctx, planReq(local)); err != nil || !strings.HasPrefix(rep.Said, "No plan was recorded") {
		t.Fatalf("remove-plan of no plan: %+v, %v", rep, err)
	}
}

// A plan that names the keeper's own streams, another kept data's streams,
// or a bad name, is refused with a sentence, and nothing is recorded.
func TestPlanRefusals(t *testing.T) {
	e := newEnv(t, func(c *keeper.Config) { c.OwnStreams = []string{"KV_myindex"} })
	// shop/orders is a kept data the keeper knows: it has a plan.
	if _, err := e.k.SetPlan(e.ctx, keeper.Request{Module: "shop", Local: "orders", Streams: []string{"ORDERS"}}); err != nil {
		t.Fatal(err)
	}
	// billing/ledger has a point: its naming-rule streams are its own.
	e.snapshot(1, "x")
	for _, c := range []struct {
		local   string
		streams []string
		says    string
	}{
		{"other", []string{"KV_kept"}, "the keeper's own"},
		{"other", []string{"KEEPER_ACTS"}, "the keeper's own"},
		{"other", []string{"KEEPER_ACTS_ops_keeper"}, "the keeper's own"},
		{"other", []string{"KV_myindex"}, "the keeper's own"},
		{"other", []string{"ORDERS"}, "another kept data, shop/orders (its plan lists it)"},
		{"other", []string{e.names.Stream}, "another kept data, billing/ledger (its restore point point.billing.ledger.1.x holds it); a stream belongs to one kept data " +
			"(discard-point of that point, `nats-keeper discard-point billing ledger --form 1 --before x --why TEXT`, frees it), so no plan was recorded"},
		{"other", []string{"KV_billing_ledger"}, "another kept data, billing/ledger"},
		{"other", []string{"a.b"}, "not a stream or consumer name"},
		{"other", []string{"A", "A"}, "twice"},
		{"other", nil, "1 to 64 streams"},
	} {
		_, err := e.k.SetPlan(e.ctx, planReq(c.local, c.streams...))
		if !errors.Is(err, keeper.ErrBadRequest) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("set-plan %v: %v; want a bad request saying %q", c.streams, err, c.says)
		}
	}
	if _, err := e.k.ShowPlan(e.ctx, planReq("other")); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("a refused plan was recorded: %v", err)
	}
	// Its own kept data's streams, and a stream no one claims, are fine.
	if _, err := e.k.SetPlan(e.ctx, planReq(local, e.names.Stream, "LEDGER_EVENTS")); err != nil {
		t.Fatal(err)
	}
	// Only set-plan takes streams.
	if _, err := e.k.ShowPlan(e.ctx, planReq(local, "X")); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("show-plan with streams: %v", err)
	}
	if _, err := e.k.SnapshotKept(e.ctx, keeper.Request{Module: module, Local: local, Form: 1, Fingerprint: "y", Streams: []string{"X"}}); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("snapshot-kept with streams: %v", err)
	}
}
