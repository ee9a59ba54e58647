package keeper_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestRestoreMovesOnlyTheModulesConsumers: on a shared stream, a restore of
// billing sets back billing's consumers (by name, or declared by metadata)
// and no one else's: not billing-eu's (a longer module the bus knows), not
// one declared another module's or another kept data's, and not one that
// declared another owner after the point was taken. The plan and the reply
// list every consumer set back with its old and new ack floor.
func TestRestoreMovesOnlyTheModulesConsumers(t *testing.T) {
	e := newEnv(t)
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "billing-eu_data", Subjects: []string{"eu.data.>"}}); err != nil {
		t.Fatal(err)
	}
	shared, err := e.js.Stream(e.ctx, sample.SharedStream)
	if err != nil {
		t.Fatal(err)
	}
	consumers := map[string]map[string]string{
		"billing-eu_reader": nil, // billing-eu's: billing-eu_data exists
		"billing_audit":     {keeper.MetaModule: "audit"},
		"ops-tail":          {keeper.MetaModule: module},
		"billing_other":     {keeper.MetaModule: module, keeper.MetaLocal: "other"},
		"billing_late":      nil, // billing's when the point is taken; declares another owner later
	}
	cons := map[string]jetstream.Consumer{}
	for name, md := range consumers {
		c, err := shared.CreateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		if err := sample.Ack(e.ctx, c, 5); err != nil {
			t.Fatal(err)
		}
		cons[name] = c
	}
	snap := e.snapshot(1, "fp")
	recorded := map[string]bool{}
	for _, p := range snap.Point.Positions {
		recorded[p.Consumer] = true
	}
	for name, want := range map[string]bool{e.names.Events: true, "ops-tail": true, "billing_late": true,
		"billing-eu_reader": false, "billing_audit": false, "billing_other": false} {
		if recorded[name] != want {
			t.Errorf("the point records %s: %v, want %v", name, recorded[name], want)
		}
	}
	for _, c := range cons {
		if err := sample.Ack(e.ctx, c, 5); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := shared.UpdateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: "billing_late", AckPolicy: jetstream.AckExplicitPolicy,
		Metadata: map[string]string{keeper.MetaModule: "late"}}); err != nil {
		t.Fatal(err)
	}

	dry := req(1, "fp")
	dry.DryRun = true
	plan, err := e.k.RestoreKept(e.ctx, dry)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, plan.Said, "ops-tail on "+sample.SharedStream+" from ack floor 10 to 5", "leave alone 1", "billing_late")
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatal(err)
	}
	moved := map[string]keeper.Move{}
	for _, m := range rep.Moves {
		moved[m.Consumer] = m
	}
	if m, ok := moved["ops-tail"]; !ok || m.From == nil || *m.From != 10 || m.To != 5 || m.By != keeper.MoveReset {
		t.Errorf("the reply's move of ops-tail is %+v, want from 10 to 5 by reset", m)
	}
	for name, want := range map[string]uint64{"ops-tail": 5, "billing-eu_reader": 10, "billing_audit": 10, "billing_other": 10, "billing_late": 10} {
		info, err := shared.Consumer(e.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.CachedInfo().AckFloor.Stream; got != want {
			t.Errorf("after the restore %s stands at ack floor %d, want %d", name, got, want)
		}
		if _, ok := moved[name]; ok != (want == 5) {
			t.Errorf("the reply lists %s among the moves: %v", name, ok)
		}
	}
	// The set-back consumer keeps its own configuration, so the app's own
	// create-or-update with it still works (no 10012).
	info, err := shared.Consumer(e.ctx, "ops-tail")
	if err != nil {
		t.Fatal(err)
	}
	if p := info.CachedInfo().Config.DeliverPolicy; p != jetstream.DeliverAllPolicy {
		t.Errorf("after the restore ops-tail delivers by %v, want its own deliver policy all", p)
	}
	if _, err := shared.CreateOrUpdateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: "ops-tail", AckPolicy: jetstream.AckExplicitPolicy,
		Metadata: consumers["ops-tail"]}); err != nil {
		t.Errorf("the app's create-or-update of ops-tail with its own config after the restore: %v", err)
	}
}

// TestPlanConsumersBelongToTheirKeptData: a consumer a plan lists is that
// kept data's whatever its name, and no other kept data's.
func TestPlanConsumersBelongToTheirKeptData(t *testing.T) {
	e := newEnv(t)
	shared, err := e.js.Stream(e.ctx, sample.SharedStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"odd-name", "billing_listed_elsewhere"} {
		if _, err := shared.CreateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.k.SetPlan(e.ctx, keeper.Request{Module: module, Local: local, Streams: e.names.Streams(),
		Consumers: []keeper.PlanConsumer{{Stream: sample.SharedStream, Consumer: "odd-name"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.SetPlan(e.ctx, keeper.Request{Module: module, Local: "elsewhere", Streams: []string{"billing_elsewhere"},
		Consumers: []keeper.PlanConsumer{{Stream: sample.SharedStream, Consumer: "billing_listed_elsewhere"}}}); err != nil {
		t.Fatal(err)
	}
	snap := e.snapshot(1, "fp")
	recorded := map[string]bool{}
	for _, p := range snap.Point.Positions {
		recorded[p.Consumer] = true
	}
	if !recorded["odd-name"] || recorded["billing_listed_elsewhere"] || !recorded[e.names.Events] {
		t.Errorf("the point records %v; want odd-name (listed by the plan) and %s, not billing_listed_elsewhere (another kept data's)",
			recorded, e.names.Events)
	}
}

// TestSiblingKeptDataKeepTheirConsumers: two kept data of one module whose
// consumers share names. A point of billing/ledger records no consumer on
// billing/other's streams (by name or by its plan), whether the consumer is
// the module's by name or by metadata naming the module alone; so
// restoring ledger never sets back other's consumers. A consumer whose
// metadata names ledger itself is ledger's wherever it sits.
func TestSiblingKeptDataKeepTheirConsumers(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"billing_other", "billing_planned-elsewhere"} {
		if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.k.SetPlan(e.ctx, keeper.Request{Module: module, Local: "elsewhere", Streams: []string{"billing_planned-elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	type cons struct{ stream, name string }
	made := map[cons]map[string]string{
		{"billing_other", e.names.Events}:              nil, // same name as ledger's own consumer
		{"billing_other", "billing-audit"}:             {keeper.MetaModule: module},
		{"billing_planned-elsewhere", "billing-audit"}: nil,
		{"billing_other", "billing-declared"}:          {keeper.MetaModule: module, keeper.MetaLocal: local},
		{sample.SharedStream, "billing-audit"}:         nil, // the module's, on no kept data's stream
	}
	for c, md := range made {
		s, err := e.js.Stream(e.ctx, c.stream)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: c.name, AckPolicy: jetstream.AckExplicitPolicy, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	snap := e.snapshot(1, "fp")
	recorded := map[cons]bool{}
	for _, p := range snap.Point.Positions {
		recorded[cons{p.Stream, p.Consumer}] = true
	}
	for c, want := range map[cons]bool{
		{"billing_other", e.names.Events}:              false,
		{"billing_other", "billing-audit"}:             false,
		{"billing_planned-elsewhere", "billing-audit"}: false,
		{"billing_other", "billing-declared"}:          true,
		{sample.SharedStream, "billing-audit"}:         true,
	} {
		if recorded[c] != want {
			t.Errorf("the point of %s/%s records %s on %s: %v, want %v", module, local, c.name, c.stream, recorded[c], want)
		}
	}
}

// TestLongerModuleKnownByItsPointAlone: billing-eu has a restore point but
// nothing on the bus any more; its consumer billing-eu_tail is still not
// billing's, so billing's point does not record it. So too when billing's
// consumers name more longer modules than are asked about one by one
// (maxProbes, 64), and the index is listed whole instead.
func TestLongerModuleKnownByItsPointAlone(t *testing.T) {
	for _, extra := range []int{0, 70} {
		t.Run(fmt.Sprintf("%d more consumers", extra), func(t *testing.T) {
			e := newEnv(t)
			if _, err := e.js.CreateKeyValue(e.ctx, jetstream.KeyValueConfig{Bucket: "billing-eu_cfg"}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.k.SnapshotKept(e.ctx, keeper.Request{Module: "billing-eu", Local: "cfg", Form: 1, Fingerprint: "x"}); err != nil {
				t.Fatal(err)
			}
			if err := e.js.DeleteKeyValue(e.ctx, "billing-eu_cfg"); err != nil {
				t.Fatal(err)
			}
			shared, err := e.js.Stream(e.ctx, sample.SharedStream)
			if err != nil {
				t.Fatal(err)
			}
			names := []string{"billing-eu_tail", "billing-east"}
			for i := range extra {
				names = append(names, fmt.Sprintf("billing_x%02d", i))
			}
			for _, name := range names {
				if _, err := shared.CreateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
					t.Fatal(err)
				}
			}
			recorded := map[string]bool{}
			for _, p := range e.snapshot(1, "fp").Point.Positions {
				recorded[p.Consumer] = true
			}
			if recorded["billing-eu_tail"] || !recorded["billing-east"] || !recorded[e.names.Events] {
				t.Errorf("billing's point records %v; want billing-east and %s, and not billing-eu_tail (billing-eu has a point)", recorded, e.names.Events)
			}
			for _, name := range names[2:] {
				if !recorded[name] {
					t.Errorf("billing's point does not record %s", name)
				}
			}
		})
	}
}
