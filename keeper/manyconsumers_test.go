package keeper_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// maxIndexRecord bounds a point's or an aside's record in the index,
// whatever the number of the module's consumers: their positions live in
// point.json and aside.json, not in the index.
const maxIndexRecord = 8 << 10

// TestManyConsumersKeepTheIndexSmall takes a point of a kept data whose
// module has 2,700 durable consumers, 900 on each of 3 streams (two of the
// kept data's own, and the shared one), and restores it over the live data:
// the point and the aside are recorded with small index records, and every
// consumer is set back.
func TestManyConsumersKeepTheIndexSmall(t *testing.T) {
	e := newEnv(t)
	const each = 900
	on := []string{e.names.KVStream, e.names.Stream, sample.SharedStream}
	for _, s := range on {
		st, err := e.js.Stream(e.ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		for i := range each {
			cfg := jetstream.ConsumerConfig{Durable: fmt.Sprintf("%s-c%04d", module, i), AckPolicy: jetstream.AckExplicitPolicy,
				Description: "one of many consumers of the module, each with a configuration of some size"}
			if s == sample.SharedStream {
				cfg.FilterSubject = "events." + module + ".>"
			}
			if _, err := st.CreateConsumer(e.ctx, cfg); err != nil {
				t.Fatalf("consumer %d on %s: %v", i, s, err)
			}
		}
	}
	snap := e.snapshot(3, "many")
	if got := len(snap.Positions); got < 3*each {
		t.Fatalf("snapshot-kept read %d positions, want at least %d", got, 3*each)
	}
	rec := indexRecord(t, e, fmt.Sprintf("point.%s.%s.3.many", module, local))
	var p keeper.Point
	if err := json.Unmarshal(rec, &p); err != nil {
		t.Fatal(err)
	}
	if p.PositionCount != len(snap.Positions) || len(p.Positions) != 0 {
		t.Errorf("index record: %d positions counted and %d carried, want %d counted and none carried",
			p.PositionCount, len(p.Positions), len(snap.Positions))
	}

	// Move the consumers on the shared stream on, so that the restore has
	// to set each back.
	nc := natstest.Connect(t, e.srv)
	for i := range each {
		name := fmt.Sprintf("%s-c%04d", module, i)
		m, err := nc.RequestWithContext(e.ctx, "$JS.API.CONSUMER.RESET."+sample.SharedStream+"."+name, []byte(`{"seq":5}`))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Error any `json:"error"`
		}
		if json.Unmarshal(m.Data, &r) != nil || r.Error != nil {
			t.Fatalf("reset %s: %s", name, m.Data)
		}
	}
	e.change()
	rep, err := e.k.RestoreKept(e.ctx, req(3, "many"))
	if err != nil {
		t.Fatalf("restore-kept over the live data: %v", err)
	}
	indexRecord(t, e, "aside."+rep.Aside.ID)
	for _, s := range on {
		st, err := e.js.Stream(e.ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ci := range st.ListConsumers(e.ctx).Info() {
			if len(ci.Name) < len(module)+2 || ci.Name[:len(module)+2] != module+"-c" {
				continue
			}
			n++
			if ci.AckFloor.Stream != 0 || ci.Delivered.Stream != 0 {
				t.Errorf("%s on %s: ack floor %d, delivered %d after the restore, want 0 and 0 as recorded",
					ci.Name, s, ci.AckFloor.Stream, ci.Delivered.Stream)
			}
		}
		if n != each {
			t.Errorf("%s holds %d of the module's many consumers after the restore, want %d", s, n, each)
		}
	}
}

// indexRecord is the value of key in e's index, checked to be small.
func indexRecord(t *testing.T, e *env, key string) []byte {
	t.Helper()
	rec, err := e.bus.Get(e.ctx, key)
	if err != nil {
		t.Fatalf("index record %s: %v", key, err)
	}
	if len(rec) > maxIndexRecord {
		t.Errorf("index record %s is %d bytes, over %d", key, len(rec), maxIndexRecord)
	}
	return rec
}

// TestOldIndexRecordsWithPositions reads a point's index record as keepers
// before this one wrote it, positions and all: list-kept takes it, and a
// rebuild makes it the small record, which counts them.
func TestOldIndexRecordsWithPositions(t *testing.T) {
	e := newEnv(t)
	snap := e.snapshot(3, "old")
	if len(snap.Positions) == 0 {
		t.Fatal("the sample's point holds no positions")
	}
	key := fmt.Sprintf("point.%s.%s.3.old", module, local)
	old := *snap.Point
	old.PositionCount = 0
	data, _ := json.Marshal(old)
	if err := e.bus.Put(e.ctx, key, data); err != nil {
		t.Fatal(err)
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil || len(list.Points) != 1 || len(list.Points[0].Positions) != len(snap.Positions) {
		t.Fatalf("list-kept of an old record: %+v, %v", list, err)
	}
	if written, _, err := e.k.Rebuild(e.ctx); err != nil || written != 1 {
		t.Fatalf("rebuild wrote %d record(s), want 1: %v", written, err)
	}
	var p keeper.Point
	if err := json.Unmarshal(indexRecord(t, e, key), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Positions) != 0 || p.PositionCount != len(snap.Positions) {
		t.Errorf("rebuilt record carries %d positions and counts %d, want none and %d", len(p.Positions), p.PositionCount, len(snap.Positions))
	}
	if _, err := e.k.RestoreKept(e.ctx, req(3, "old")); err != nil {
		t.Errorf("restore-kept of the point after the rebuild: %v", err)
	}
}

// TestConsumerMadeJustBeforeASnapshot makes a stream with no consumer and
// then, right before snapshot-kept, one of the module's consumers on it:
// the snapshot records its position. Only streams with a consumer are
// asked for their consumers, and the stream list is read by the snapshot.
func TestConsumerMadeJustBeforeASnapshot(t *testing.T) {
	e := newEnv(t)
	e.snapshot(3, "before") // the keeper has listed the bus once
	st, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: module + "-late", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	snap := e.snapshot(3, "after")
	found := false
	for _, p := range snap.Positions {
		found = found || (p.Stream == "LATE" && p.Consumer == module+"-late")
	}
	if !found {
		t.Errorf("the consumer made just before the snapshot is not among its %d positions", len(snap.Positions))
	}
}
