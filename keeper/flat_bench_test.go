package keeper_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// BenchmarkSnapshotManyKept is a sequential snapshot-kept of one 10-key KV
// bucket while the bus holds many such kept data, each with a point in the
// index (KEEPER_BENCH_KEPT of them, default 100); it reports the median.
//
//	KEEPER_BENCH_KEPT=5000 go test ./keeper -run XXX -bench SnapshotManyKept -benchtime 10x
//
// Medians measured on 2 shared cores (load 6-13), before and after the
// snapshot listed the streams once and asked only those with consumers:
// 100 kept data 82 -> 49 ms, 1,000 312 -> 87 ms, 5,000 3,059 -> 528 ms.
// What remains grows with the streams on the bus: the server's stream list.
func BenchmarkSnapshotManyKept(b *testing.B) {
	n := benchSize("KEEPER_BENCH_KEPT", 100)
	ctx := context.Background()
	tb := testbed.New(b, testbed.WithoutKeeper())
	js, ad := tb.JS, tb.Bus
	for i := range n {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: fmt.Sprintf("m%d_kv", i)})
		if err != nil {
			b.Fatal(err)
		}
		for j := range 10 {
			if _, err := kv.PutString(ctx, fmt.Sprintf("k%d", j), "value"); err != nil {
				b.Fatal(err)
			}
		}
	}
	k := benchKeeper(b, tb)
	// Each kept data has a point in the index (written after New, whose
	// rebuild would remove records without files).
	for i := range n {
		if err := ad.Put(ctx, fmt.Sprintf("point.m%d.kv.1.x", i), []byte(`{"module":"m`+strconv.Itoa(i)+`","local":"kv"}`)); err != nil {
			b.Fatal(err)
		}
	}
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if _, err := k.SnapshotKept(ctx, keeper.Request{Module: "m0", Local: "kv", Form: 1, Fingerprint: "f" + strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	reportMedian(b, took)
}
