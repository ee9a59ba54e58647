package keeper_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// BenchmarkModuleShape times, for a kept data of a KV bucket, an object
// store and a stream (a quarter, a quarter and a half of the bytes, random
// 1 KiB payloads; $KEEPER_BENCH_MIB MiB in all, default 64), a snapshot, a
// restore into absent data and a rollback (a restore over the live data),
// one stream at a time and three at once, in alternating pairs on the same
// data, and reports medians. No timing is asserted.
func BenchmarkModuleShape(b *testing.B) {
	mib := benchSize("KEEPER_BENCH_MIB", 64)
	ctx := context.Background()
	tb := testbed.New(b, testbed.WithoutKeeper(), testbed.WithData(func(_ context.Context, js jetstream.JetStream) error {
		fillModule(b, js, int64(mib)<<20)
		return nil
	}))
	js := tb.JS
	pars := []int{1, 3}
	keepers := map[int]*keeper.Keeper{}
	st := fileStore(b, b.TempDir()) // one index, so one store
	for _, par := range pars {
		var err error
		if keepers[par], err = tb.KeeperWith(st, testbed.WithConfig(func(c *keeper.Config) { benchParallel(c, par, b.TempDir()) })); err != nil {
			b.Fatal(err)
		}
	}
	took := map[string][]time.Duration{}
	round := func(i, par int) {
		k := keepers[par]
		r := keeper.Request{Module: "bench", Local: "mod", Form: 1, Fingerprint: fmt.Sprintf("fp%dp%d", i, par), Caller: "bench", Why: "bench"}
		t0 := time.Now()
		if _, err := k.SnapshotKept(ctx, r); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for _, s := range []string{"KV_bench_mod", "OBJ_bench_mod", "bench_mod"} {
			if err := js.DeleteStream(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		if _, err := k.RestoreKept(ctx, r); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if _, err := k.RestoreKept(ctx, r); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		p := "parallel" + strconv.Itoa(par)
		took[p+"-snapshot"] = append(took[p+"-snapshot"], t1.Sub(t0))
		took[p+"-restore-absent"] = append(took[p+"-restore-absent"], t3.Sub(t2))
		took[p+"-rollback"] = append(took[p+"-rollback"], t4.Sub(t3))
		b.Logf("parallel %d: snapshot %v, restore into absent %v, rollback %v", par, t1.Sub(t0), t3.Sub(t2), t4.Sub(t3))
	}
	for i := 0; b.Loop(); i++ {
		// Alternating pairs: each round runs both, in turn first.
		if i%2 == 0 {
			round(i, pars[0])
			round(i, pars[1])
		} else {
			round(i, pars[1])
			round(i, pars[0])
		}
	}
	for name, ds := range took {
		slices.Sort(ds)
		b.ReportMetric(ds[len(ds)/2].Seconds(), "s-median/"+name)
		b.Logf("%s: median %v, min %v, max %v over %d", name, ds[len(ds)/2], ds[0], ds[len(ds)-1], len(ds))
	}
}

// fillModule makes kept data bench/mod of about size bytes of random
// payloads: KV bucket, object store and stream.
func fillModule(b *testing.B, js jetstream.JetStream, size int64) {
	ctx := context.Background()
	r := rand.New(rand.NewChaCha8([32]byte{7}))
	payload := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		return p
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "bench_mod"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range int(size / 4 / 1024) {
		if _, err := kv.Put(ctx, fmt.Sprintf("k%07d", i), payload(1024)); err != nil {
			b.Fatal(err)
		}
	}
	obj, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "bench_mod"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := obj.Put(ctx, jetstream.ObjectMeta{Name: "blob"}, bytes.NewReader(payload(int(size/4)))); err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "bench_mod", Subjects: []string{"bench.mod.>"}}); err != nil {
		b.Fatal(err)
	}
	for i := range int(size / 2 / 1024) {
		if _, err := js.PublishAsync(fmt.Sprintf("bench.mod.%d", i%1000), payload(1024)); err != nil {
			b.Fatal(err)
		}
		if i%4096 == 4095 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
}
