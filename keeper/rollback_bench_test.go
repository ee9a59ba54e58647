package keeper_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/natsstore"
)

// BenchmarkRollback times restore-kept over live data of one stream of
// $KEEPER_BENCH_MIB MiB (default 64) of random 1 KiB payloads, in the
// keeper's own process, and reports the median of the whole and of each
// step its evidence times (verify, aside, remove, restore, ...), so that
// what a rollback waits on is seen without a profile: the verification
// of the point runs beside the aside, so the two overlap. No timing is
// asserted. KEEPER_BENCH_STORE=nats keeps the point and the aside in an
// object store on a second embedded server (a vault) instead of a
// directory.
func BenchmarkRollback(b *testing.B) {
	mib := benchSize("KEEPER_BENCH_MIB", 64)
	ctx := context.Background()
	tb := testbed.New(b, testbed.WithData(fillRollback(mib)), testbed.WithStore(rollbackStore))
	k := tb.Keeper
	req := keeper.Request{Module: "bench", Local: "rb", Form: 1, Fingerprint: "fp", Caller: "bench", Why: "bench"}
	if _, err := k.SnapshotKept(ctx, req); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	steps := map[string][]float64{}
	for b.Loop() {
		t0 := time.Now()
		rep, err := k.RestoreKept(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		if rep.Evidence == nil || len(rep.Evidence.Steps) == 0 {
			b.Fatal("the rollback's reply has no timed steps in its evidence")
		}
		for _, s := range rep.Evidence.Steps {
			steps[s.Step] = append(steps[s.Step], s.Seconds)
		}
	}
	reportMedian(b, took)
	for step, ss := range steps {
		slices.Sort(ss)
		b.ReportMetric(ss[len(ss)/2], "s-median/"+strings.ReplaceAll(step, " ", "-"))
	}
}

// fillRollback makes stream bench_rb of mib MiB of random bytes.
func fillRollback(mib int) func(ctx context.Context, js jetstream.JetStream) error {
	return func(ctx context.Context, js jetstream.JetStream) error {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "bench_rb", Subjects: []string{"bench.rb.>"}}); err != nil {
			return err
		}
		r := rand.New(rand.NewChaCha8([32]byte{9}))
		p := make([]byte, 1024)
		for i := range mib * 1024 {
			for j := range p {
				p[j] = byte(r.Uint32())
			}
			if _, err := js.PublishAsync(fmt.Sprintf("bench.rb.%d", i%1000), p); err != nil {
				return err
			}
			if i%4096 == 4095 {
				<-js.PublishAsyncComplete()
			}
		}
		<-js.PublishAsyncComplete()
		return nil
	}
}

// rollbackStore is the file store in dir or, with KEEPER_BENCH_STORE=nats,
// an object store on a server of its own (a vault).
func rollbackStore(t testing.TB, dir string) store.Store {
	if os.Getenv("KEEPER_BENCH_STORE") != "nats" {
		return fileStore(t, dir)
	}
	vjs := testbed.New(t, testbed.WithoutBus()).JS
	st, err := natsstore.Open(context.Background(), vjs, "bench", natsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
