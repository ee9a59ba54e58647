package keeper_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestCensusLatency times sequential snapshot-kept of one 10-key KV bucket
// with $KEEPER_CENSUS_TIERS (e.g. "100,1000,5000"; 30 when unset, which CI
// runs) such kept data on the bus, 20 snapshots per tier, and logs the
// median. It asserts no timing, only that every snapshot is taken.
func TestCensusLatency(t *testing.T) {
	tiers := os.Getenv("KEEPER_CENSUS_TIERS")
	if tiers == "" {
		tiers = "30"
	}
	ctx := context.Background()
	tb := testbed.New(t)
	nc, js, k := tb.Conn, tb.JS, tb.Keeper
	have := 0
	for _, f := range strings.Split(tiers, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		for ; have < n; have++ {
			kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: fmt.Sprintf("cen_d%05d", have+1)})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if _, err := kv.Put(ctx, fmt.Sprintf("k%d", i), []byte("0123456789abcdef")); err != nil {
					t.Fatal(err)
				}
			}
		}
		var took []time.Duration
		counts := map[string]int{}
		var mu sync.Mutex
		sub, err := nc.Subscribe("$JS.API.>", func(m *nats.Msg) {
			f := strings.Split(m.Subject, ".")
			mu.Lock()
			counts[strings.Join(f[:min(len(f), 4)], ".")]++
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			r := keeper.Request{Module: "cen", Local: fmt.Sprintf("d%05d", n-i), Form: 1, Fingerprint: "fp", Caller: "t", Why: "t"}
			t0 := time.Now()
			if _, err := k.SnapshotKept(ctx, r); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(t0))
		}
		sub.Unsubscribe()
		mu.Lock()
		t.Logf("%d kept data: API requests in 20 snapshots: %v", n, counts)
		mu.Unlock()
		slices.Sort(took)
		t.Logf("%d kept data: snapshot-kept median %v (min %v, max %v)", n, took[len(took)/2], took[0], took[len(took)-1])
		if par, _ := strconv.Atoi(os.Getenv("KEEPER_CENSUS_PAR")); par > 1 {
			concurrentSnapshots(t, nc, k, n, par)
		}
	}
}

// concurrentSnapshots takes 5 snapshots in each of par goroutines at once,
// each of its own kept data among the n, and logs the points per second.
func concurrentSnapshots(t *testing.T, nc *nats.Conn, k *keeper.Keeper, n, par int) {
	t.Helper()
	var lists, infos atomic.Int64
	sub, err := nc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		switch m.Subject {
		case "$JS.API.STREAM.LIST":
			lists.Add(1)
		case "$JS.API.INFO":
			infos.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	var wg sync.WaitGroup
	errs := make(chan error, par)
	t0 := time.Now()
	for g := range par {
		wg.Go(func() {
			for i := range 5 {
				r := keeper.Request{Module: "cen", Local: fmt.Sprintf("d%05d", n-g), Form: 1, Fingerprint: fmt.Sprintf("par%d", i), Caller: "t", Why: "t"}
				if _, err := k.SnapshotKept(context.Background(), r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	took := time.Since(t0)
	t.Logf("%d kept data, %d at once: %d points in %v, %.1f points/s (%d pages of the full stream list, %d account totals read)",
		n, par, 5*par, took, float64(5*par)/took.Seconds(), lists.Load(), infos.Load())
}
