package wiring_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/embedded"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// Concurrent snapshot-kept must not overrun the keeper's one connection:
// every snapshot lets the server send its window before acknowledging, and
// the server drops a client it has queued more than max_pending for ("Slow
// Consumer Detected: MaxPending … Exceeded"), failing every verb in flight.
// Eight snapshots of 8 MiB windows reached the default 64 MiB and failed, all
// of them; with the connection's in-flight budget every snapshot the keeper
// admits succeeds. More snapshots are sent than the budget lets stream at
// once (four), and the keeper admits them all (max-heavy above their
// number).
func TestConcurrentSnapshotsStayUnderMaxPending(t *testing.T) {
	t.Run("max_pending 8 MiB, budget 4 MiB, 12 snapshots of 8 MiB", func(t *testing.T) {
		concurrentSnapshots(t, 8<<20, 4<<20, 12, 8<<20)
	})
	t.Run("default max_pending and budget, 8 snapshots of 24 MiB", func(t *testing.T) {
		concurrentSnapshots(t, 0, 0, 8, 24<<20)
	})
}

// concurrentSnapshots fills n streams of size random bytes on a server with
// maxPending (0: the server's default), starts a keeper with the in-flight
// budget inFlight (0: its default) admitting more than n heavy verbs, sends n
// snapshot-kept at once, and fails unless every one succeeds on a
// connection that never dropped.
func concurrentSnapshots(t *testing.T, maxPending, inFlight int64, n, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := embedded.Options(t.TempDir())
	if maxPending > 0 {
		o.MaxPending = maxPending
	}
	srv, err := embedded.Run(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { embedded.Shutdown(srv) })
	js, err := jetstream.New(connectTo(t, srv.ClientURL()), jetstream.WithPublishAsyncMaxPending(64))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	payload := make([]byte, 64<<10)
	for i := range n {
		name := fmt.Sprintf("load_s%02d", i)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{fmt.Sprintf("load.s%02d.>", i)}}); err != nil {
			t.Fatal(err)
		}
		for range size / len(payload) {
			for j := range payload {
				payload[j] = byte(rng.Uint32())
			}
			if _, err := js.PublishAsync(fmt.Sprintf("load.s%02d.x", i), append([]byte(nil), payload...), jetstream.WithStallWait(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing did not finish")
	}

	nc := connectTo(t, srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	st := testbed.FileStore(t, t.TempDir())
	k, err := wiring.Start(ctx, nc, wiring.Setup{Store: st, MaxHeavy: n + 4, InFlight: inFlight,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	c := verbs.NewClient(connectTo(t, srv.ClientURL()), verbs.WithTimeout(5*time.Minute))

	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.SnapshotKept(ctx, kept.Request{Module: "load", Local: fmt.Sprintf("s%02d", i), Form: 1, Fingerprint: "f1", Caller: "test"})
		})
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			t.Errorf("snapshot-kept of load/s%02d failed: %v", i, err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d concurrent snapshots failed", failed, n)
	}
	if r := nc.Stats().Reconnects; r != 0 {
		t.Errorf("the keeper's connection was dropped and made again %d time(s) during the snapshots", r)
	}
	rep, err := c.ListKept(ctx, kept.Request{Module: "load"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != n {
		t.Errorf("list-kept shows %d points of load, want %d", len(rep.Points), n)
	}
}

// connectTo connects to url and closes the connection when the test ends.
func connectTo(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
