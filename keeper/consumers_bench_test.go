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

// BenchmarkSnapshotManyConsumers is a sequential snapshot-kept of one
// stream of 1,000 small messages whose module has many durable consumers on
// it (KEEPER_BENCH_CONSUMERS, default 2000), each at its own position; it
// reports the median. It is the keeper's side of keeper-bench's consumers
// shape, in one process, for a CPU profile:
//
//	go test ./keeper -run XXX -bench SnapshotManyConsumers -benchtime 20x -cpuprofile /tmp/cpu.out
func BenchmarkSnapshotManyConsumers(b *testing.B) {
	n := benchSize("KEEPER_BENCH_CONSUMERS", 2000)
	ctx := context.Background()
	tb := testbed.New(b, testbed.WithoutKeeper())
	js := tb.JS
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "bench_many", Subjects: []string{"bench.many.>"}, MaxConsumers: n + 10})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if _, err := js.Publish(ctx, "bench.many.x", []byte(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		cfg := jetstream.ConsumerConfig{Durable: fmt.Sprintf("bench_c%05d", i), AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: uint64(i%1000 + 1)}
		if _, err := st.CreateConsumer(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	k := benchKeeper(b, tb)
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		rep, err := k.SnapshotKept(ctx, keeper.Request{Module: "bench", Local: "many", Form: 1, Fingerprint: "f" + strconv.Itoa(i)})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		if len(rep.Positions) != n {
			b.Fatalf("the point holds %d positions, want %d", len(rep.Positions), n)
		}
	}
	reportMedian(b, took)
}
