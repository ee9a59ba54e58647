package jsbus_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

func TestSnapshotRestoreIntoFreshServer(t *testing.T) {
	ctx := testCtx(t)
	src := newBus(t)
	if err := sample.Create(ctx, src.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	n := sample.NamesOf("billing", "ledger")
	streams := append(n.Streams(), sample.SharedStream)
	before, err := sample.Dump(ctx, src.js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	type arc struct{ data, meta []byte }
	arcs := map[string]arc{}
	for _, s := range streams {
		d, m := snapshot(t, src.a, s)
		arcs[s] = arc{d, m}
		if !bytes.Contains(m, []byte(`"name": "`+s+`"`)) {
			t.Fatalf("backup.json of %s does not name it: %s", s, m)
		}
	}

	dst := newBus(t)
	for _, s := range streams {
		// A reader that hands out data with io.EOF must not lose the tail.
		if err := dst.a.Restore(ctx, s, &trickle{bytes.NewReader(arcs[s].data)}, bytes.NewReader(arcs[s].meta)); err != nil {
			t.Fatalf("restore %s: %v", s, err)
		}
	}
	after, err := sample.Dump(ctx, dst.js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, after); d != "" {
		t.Fatalf("the restored streams differ from the snapshot:\n%s", d)
	}
	kvA, err := sample.KV(ctx, src.js, n.Bus)
	if err != nil {
		t.Fatal(err)
	}
	kvB, err := sample.KV(ctx, dst.js, n.Bus)
	if err != nil {
		t.Fatal(err)
	}
	if len(kvA) == 0 || len(kvA) != len(kvB) {
		t.Fatalf("KV keys: %d before, %d after", len(kvA), len(kvB))
	}
	for k, e := range kvA {
		if kvB[k] != e {
			t.Fatalf("KV %s: %+v before, %+v after", k, e, kvB[k])
		}
	}
	bigA, err := sample.Object(ctx, src.js, n.Bus, sample.BigObject)
	if err != nil {
		t.Fatal(err)
	}
	bigB, err := sample.Object(ctx, dst.js, n.Bus, sample.BigObject)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bigA, bigB) || len(bigB) != sample.BigSize {
		t.Fatalf("big object: %d bytes before, %d after, equal %v", len(bigA), len(bigB), bytes.Equal(bigA, bigB))
	}
	info, err := dst.a.Stream(ctx, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if info.Consumers != 2 || info.Messages != 49 || info.LastSeq != 50 || info.Subjects[0] != "billing.ledger.>" {
		t.Fatalf("restored stream info: %+v", info)
	}

	// Restoring over an existing stream is refused and leaves it alone.
	err = dst.a.Restore(ctx, n.Stream, bytes.NewReader(arcs[n.Stream].data), bytes.NewReader(arcs[n.Stream].meta))
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("restore over a live stream: %v, want ErrConflict", err)
	}
	again, err := sample.Dump(ctx, dst.js, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(&sample.Snapshot{Streams: after.Streams[2:3]}, again); d != "" {
		t.Fatalf("a refused restore changed the live stream:\n%s", d)
	}
	// backup.json of another stream is refused before the bus is touched.
	err = dst.a.Restore(ctx, "OTHER", bytes.NewReader(arcs[n.Stream].data), bytes.NewReader(arcs[n.Stream].meta))
	if !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("restore under another name: %v, want ErrBadRequest", err)
	}
	if _, err := dst.a.Stream(ctx, "OTHER"); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("stream OTHER after a refused restore: %v", err)
	}
}

func TestRestoreTruncatedArchiveFails(t *testing.T) {
	ctx := testCtx(t)
	n, data, meta := sampleSnapshot(t, func(n sample.Names) string { return n.ObjStrm })
	dst := newBus(t)
	err := dst.a.Restore(ctx, n.ObjStrm, bytes.NewReader(data[:len(data)/2]), bytes.NewReader(meta))
	if err == nil {
		t.Fatal("half an archive restored without error")
	}
	if errors.Is(err, keeper.ErrConflict) || errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("half an archive: %v", err)
	}
}

// TestRestoreWaitsForTheArchivedConsumers: a restore is whole only once the
// consumers its archive holds are on the bus; an archive that claims more
// than come back gives an error that says so.
func TestRestoreWaitsForTheArchivedConsumers(t *testing.T) {
	ctx := testCtx(t)
	n, data, meta := sampleSnapshot(t, func(n sample.Names) string { return n.Stream })
	var bm map[string]map[string]any
	if err := json.Unmarshal(meta, &bm); err != nil {
		t.Fatal(err)
	}
	if bm["state"]["consumer_count"] != float64(2) {
		t.Fatalf("backup.json state: %v", bm["state"])
	}
	bm["state"]["consumer_count"] = 3
	claims, err := json.Marshal(bm)
	if err != nil {
		t.Fatal(err)
	}
	dst := newBus(t, jsbus.WithTimeout(time.Second))
	err = dst.a.Restore(ctx, n.Stream, bytes.NewReader(data), bytes.NewReader(claims))
	if !errors.Is(err, keeper.ErrFailed) || !strings.Contains(err.Error(), "only 2 of the 3 consumers") {
		t.Fatalf("an archive claiming 3 consumers and holding 2: %v", err)
	}
}

func TestMissingStreamErrors(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	if _, err := b.a.Stream(ctx, "NOPE"); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("Stream: %v", err)
	}
	if err := b.a.DeleteStream(ctx, "NOPE"); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("DeleteStream: %v", err)
	}
	var d, m buf
	if err := b.a.Snapshot(ctx, "NOPE", &d, &m); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("Snapshot: %v", err)
	}
	if !d.closed || !m.closed {
		t.Fatal("a failed snapshot left its writers open")
	}
	if err := b.a.SetPosition(ctx, keeper.Position{Stream: "NOPE", Consumer: "x", Config: []byte(`{"durable_name":"x"}`)}); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("SetPosition: %v", err)
	}
	if _, err := b.a.Stream(ctx, "a.b"); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("Stream with a dotted name: %v", err)
	}
}

func TestDeleteStream(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	n := sample.NamesOf("billing", "ledger")
	if err := b.a.DeleteStream(ctx, n.Stream); err != nil {
		t.Fatal(err)
	}
	if _, err := b.a.Stream(ctx, n.Stream); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("stream after delete: %v", err)
	}
	if _, err := b.a.Stream(ctx, n.KVStream); err != nil {
		t.Fatalf("another stream went too: %v", err)
	}
}

func TestIndex(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	keys, err := b.a.Keys(ctx, "")
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys of an empty index: %v %v", keys, err)
	}
	if _, err := b.a.Get(ctx, "point.a.b.1.x"); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	for _, k := range []string{"point.billing.ledger.3.ff", "point.billing.ledger.2.aa", "point.bills.x.1.a", "aside.billing.ledger.20260101T000000", "plan.billing.ledger"} {
		if err := b.a.Put(ctx, k, []byte(`{"k":"`+k+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.a.Put(ctx, "point.billing.ledger.2.aa", []byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	v, err := b.a.Get(ctx, "point.billing.ledger.2.aa")
	if err != nil || string(v) != `{"v":2}` {
		t.Fatalf("Get: %s %v", v, err)
	}
	for prefix, want := range map[string][]string{
		"point.billing.": {"point.billing.ledger.2.aa", "point.billing.ledger.3.ff"},
		"point.bill":     {"point.billing.ledger.2.aa", "point.billing.ledger.3.ff", "point.bills.x.1.a"},
		"aside.":         {"aside.billing.ledger.20260101T000000"},
		"nothing.":       nil,
	} {
		got, err := b.a.Keys(ctx, prefix)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Keys(%q) = %v %v, want %v", prefix, got, err, want)
		}
	}
	// Several prefixes in one list; more than a watch takes filters for
	// read from every key.
	many := []string{"aside.billing.", "point.bills.", "plan.none."}
	for i := range 300 {
		many = append(many, fmt.Sprintf("point.m%d.", i))
	}
	for _, prefixes := range [][]string{many[:3], many} {
		got, err := b.a.KeysUnder(ctx, prefixes)
		if want := []string{"aside.billing.ledger.20260101T000000", "point.bills.x.1.a"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("KeysUnder(%d prefixes) = %v %v, want %v", len(prefixes), got, err, want)
		}
	}
	if got, err := b.a.KeysUnder(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("KeysUnder(no prefixes) = %v %v", got, err)
	}
	if err := b.a.Delete(ctx, "point.billing.ledger.3.ff"); err != nil {
		t.Fatal(err)
	}
	if err := b.a.Delete(ctx, "never.there"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if _, err := b.a.Get(ctx, "point.billing.ledger.3.ff"); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	got, err := b.a.Keys(ctx, "point.")
	if err != nil || !slices.Equal(got, []string{"point.billing.ledger.2.aa", "point.bills.x.1.a"}) {
		t.Fatalf("Keys after Delete: %v %v", got, err)
	}
	if err := b.a.Put(ctx, "bad key", []byte("x")); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("Put of a bad key: %v", err)
	}
	if err := b.a.Put(ctx, "big", make([]byte, 2<<20)); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("Put of an oversize value: %v", err)
	}
}

func TestActs(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t, jsbus.WithPrefix("mesh-broker"), jsbus.WithActsStream("KEEPER_ACTS"))
	act := keeper.Act{Verb: "discard-aside", Module: "billing", Local: "ledger", Caller: "ops-jane", Why: "done with it",
		Hand: true, What: "discard aside billing.ledger.x", Outcome: "intent", Detail: []byte(`{"aside":"x"}`)}
	if err := b.a.Record(ctx, act); err != nil {
		t.Fatal(err)
	}
	s, err := b.js.Stream(ctx, "KEEPER_ACTS")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "mesh-broker.acts.discard-aside")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Data), `"why":"done with it"`) || !strings.Contains(string(m.Data), `"hand":true`) {
		t.Fatalf("stored act: %s", m.Data)
	}
	if err := b.a.Record(ctx, keeper.Act{Verb: "a.b"}); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("act with a dotted verb: %v", err)
	}
	// Without the acts stream nothing acknowledges the act: Record fails.
	if err := b.js.DeleteStream(ctx, "KEEPER_ACTS"); err != nil {
		t.Fatal(err)
	}
	if err := b.a.Record(ctx, act); err == nil {
		t.Fatal("an act with no stream to store it was reported recorded")
	}
}

func TestNewIsIdempotentAndChecksActsStream(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	if err := b.a.Put(ctx, "plan.a.b", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	a2, err := jsbus.New(ctx, b.nc, jsbus.WithLogger(quiet()))
	if err != nil {
		t.Fatalf("second New: %v", err)
	}
	if v, err := a2.Get(ctx, "plan.a.b"); err != nil || string(v) != "{}" {
		t.Fatalf("second adapter lost the index: %s %v", v, err)
	}
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "WRONG_ACTS", Subjects: []string{"elsewhere.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := jsbus.New(ctx, b.nc, jsbus.WithLogger(quiet()), jsbus.WithActsStream("WRONG_ACTS")); !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("acts stream that does not take the acts subjects: %v", err)
	}
	if _, err := jsbus.New(ctx, b.nc, jsbus.WithBucket("a.b")); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("dotted bucket name: %v", err)
	}
	if b.a.ServerVersion() == "" || !strings.HasPrefix(b.a.ServerVersion(), "2.") {
		t.Fatalf("server version %q", b.a.ServerVersion())
	}
}

// failing fails its writes after limit bytes, or its Close.
type failing struct {
	buf
	limit     int
	failClose bool
}

var errDisk = errors.New("disk full")

func (f *failing) Write(p []byte) (int, error) {
	if f.Len()+len(p) > f.limit {
		return 0, errDisk
	}
	return f.buf.Write(p)
}

func (f *failing) Close() error {
	f.closed = true
	if f.failClose {
		return errDisk
	}
	return nil
}

func TestSnapshotWriterFailures(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	n := sample.NamesOf("billing", "ledger")
	for _, c := range []struct {
		name       string
		data, meta *failing
	}{
		{"data write", &failing{limit: 1000}, &failing{limit: 1 << 30}},
		{"meta write", &failing{limit: 1 << 30}, &failing{limit: 10}},
		{"data close", &failing{limit: 1 << 30, failClose: true}, &failing{limit: 1 << 30}},
		{"meta close", &failing{limit: 1 << 30}, &failing{limit: 1 << 30, failClose: true}},
	} {
		err := b.a.Snapshot(ctx, n.ObjStrm, c.data, c.meta)
		if !errors.Is(err, errDisk) {
			t.Errorf("%s failing: %v, want the disk error", c.name, err)
		}
		if !c.data.closed || !c.meta.closed {
			t.Errorf("%s failing: writers left open", c.name)
		}
	}
	// The stream is still whole and a later snapshot works.
	snapshot(t, b.a, n.ObjStrm)
}

func TestRestoreKeepsArchivedReplicasAndReportsReadErrors(t *testing.T) {
	ctx := testCtx(t)
	n, data, meta := sampleSnapshot(t, func(n sample.Names) string { return n.Stream })
	dst := newBus(t)

	// An archive that asks for three replicas is not squeezed onto one server.
	r3 := bytes.Replace(meta, []byte(`"num_replicas": 1`), []byte(`"num_replicas": 3`), 1)
	if bytes.Equal(r3, meta) {
		t.Fatalf("backup.json has no num_replicas 1: %s", meta)
	}
	if err := dst.a.Restore(ctx, n.Stream, bytes.NewReader(data), bytes.NewReader(r3)); err == nil {
		t.Fatal("an R3 archive was restored on a single server")
	}
	if info, err := dst.a.Stream(ctx, n.Stream); err == nil {
		t.Fatalf("an R3 archive left a stream on a single server: %+v", info)
	}

	// A reader that fails half way fails the restore with its error.
	broken := io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(errDisk))
	if err := dst.a.Restore(ctx, n.Stream, broken, bytes.NewReader(meta)); !errors.Is(err, errDisk) {
		t.Fatalf("restore from a failing reader: %v, want the read error", err)
	}
}

// A restore given up part-way is ended on the server at once: by the time
// Restore returns, the server has finished its restore (its restore-complete
// advisory is out) instead of waiting out its 5 s stall timer, so removing
// the half-made stream meets a stream the server is done with.
func TestAbandonedRestoreEndsTheServersRestore(t *testing.T) {
	ctx := testCtx(t)
	n, data, meta := sampleSnapshot(t, func(n sample.Names) string { return n.ObjStrm })
	dst := newBus(t)
	watch := natstest.Connect(t, dst.srv)
	adv, err := watch.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE." + n.ObjStrm)
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	broken := io.MultiReader(bytes.NewReader(data[:len(data)/2]), iotest.ErrReader(errDisk))
	if err := dst.a.Restore(ctx, n.ObjStrm, broken, bytes.NewReader(meta)); !errors.Is(err, errDisk) {
		t.Fatalf("restore from a failing reader: %v, want the read error", err)
	}
	// The server sends the advisory before its final reply, in order, so a
	// round trip on the watching connection has it delivered.
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := adv.Pending(); got != 1 {
		t.Fatalf("%d restore-complete advisories when Restore returned, want 1: the server's restore is still running", got)
	}
	if err := dst.a.DeleteStream(ctx, n.ObjStrm); err != nil && !errors.Is(err, keeper.ErrNoStream) {
		t.Fatal(err)
	}
	if _, err := dst.a.Stream(ctx, n.ObjStrm); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("the half-made stream after its removal: %v", err)
	}
}

// sampleSnapshot creates the sample kept data billing/ledger on a bus of its
// own and takes the snapshot of the stream pick names.
func sampleSnapshot(t *testing.T, pick func(sample.Names) string) (n sample.Names, data, meta []byte) {
	t.Helper()
	src := newBus(t)
	if err := sample.Create(testCtx(t), src.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	n = sample.NamesOf("billing", "ledger")
	data, meta = snapshot(t, src.a, pick(n))
	return n, data, meta
}
