package wiring_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/kept"
)

// A kept data whose restore journal cannot be read (a newer keeper's, or
// damaged) holds back only itself: the keeper starts and serves every
// other kept data, refuses that one's verbs saying that recovery waits
// and why, and names it in the metrics and in a healthy /healthz.
func TestRecoveryWaitDoesNotStopServing(t *testing.T) {
	b := newBed(t, wiring.Setup{})
	ctx := context.Background()
	for _, m := range []string{"billing", "spare"} {
		if err := sample.Create(ctx, b.js, m, "ledger"); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.k.Stop(); err != nil {
		t.Fatal(err)
	}
	kv, err := b.js.KeyValue(ctx, wiring.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "journal.spare.ledger", []byte(`{"module":"spare","local":"ledger","format":99`)); err != nil {
		t.Fatal(err)
	}
	st := testbed.FileStore(t, b.dir)
	b.k, err = wiring.Start(ctx, b.nc, wiring.Setup{Store: st, MetricsListen: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("a keeper with one unreadable journal did not start: %v", err)
	}
	waitWaiting(t, b, 1)
	if _, err := b.client.SnapshotKept(ctx, billing); err != nil {
		t.Errorf("snapshot-kept of billing/ledger beside a kept data that waits for recovery: %v", err)
	}
	other := billing
	other.Module = "spare"
	_, err = b.client.SnapshotKept(ctx, other)
	if !errors.Is(err, kept.ErrConflict) || !strings.Contains(err.Error(), "recovery waits since") || !strings.Contains(err.Error(), "unreadable") {
		t.Errorf("snapshot-kept of spare/ledger, whose journal cannot be read: %v; want a conflict saying recovery waits and why", err)
	}
	code, body := b.get("/healthz")
	if code != http.StatusOK || !strings.Contains(body, "waiting for recovery: spare/ledger") {
		t.Errorf("/healthz while spare/ledger waits: %d %q; want 200 naming it", code, body)
	}
	if v := b.scrape()[`nats_keeper_recovery_waiting_since_timestamp_seconds{local="ledger",module="spare"}`]; v < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("no recovery_waiting_since series for spare/ledger")
	}

	// Removing the journal (here: what a newer keeper finishing it does)
	// ends the wait at the next round.
	if err := kv.Delete(ctx, "journal.spare.ledger"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.k.Keeper.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	waitWaiting(t, b, 0)
	if _, err := b.client.SnapshotKept(ctx, other); err != nil {
		t.Errorf("snapshot-kept of spare/ledger once the wait ended: %v", err)
	}
}

// waitWaiting waits until the metrics report n kept data waiting for
// recovery (the first round runs in the background as the keeper starts).
func waitWaiting(t *testing.T, b *bed, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, ok := b.scrape()["nats_keeper_recovery_waiting"]
		if ok && got == float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats_keeper_recovery_waiting is %v (reported: %v) after a minute, want %d", got, ok, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
