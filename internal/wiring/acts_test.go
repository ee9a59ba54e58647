package wiring_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/internal/outbox"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// actsBed is a bed whose keeper queues acts in a directory of its own and
// logs as JSON into log.
func actsBed(t *testing.T, bounds outbox.Options) (*bed, *syncbuf.Buffer) {
	t.Helper()
	log := &syncbuf.Buffer{}
	bounds.Try, bounds.MaxPause = 3*time.Second, time.Second
	b := newBed(t, wiring.Setup{ActsQueue: filepath.Join(t.TempDir(), "acts-queue"), ActsQueueBounds: bounds,
		Logger: slog.New(slog.NewJSONHandler(log, nil))})
	if err := sample.Create(context.Background(), b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	return b, log
}

// loggedActs is the ids of the acts the keeper made, in order (its "act"
// log lines), without those it said it could not record.
func loggedActs(t *testing.T, log *syncbuf.Buffer) (made, refused []string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(log.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
			ID  string `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		switch line.Msg {
		case "act":
			made = append(made, line.ID)
		case "act not recorded":
			refused = append(refused, line.ID)
		}
	}
	return slices.DeleteFunc(made, func(id string) bool { return slices.Contains(refused, id) }), refused
}

// storedActs is every act KEEPER_ACTS holds, in stream order.
func (b *bed) storedActs() []kept.Act {
	b.t.Helper()
	return jstest.StoredActs(b.t, b.js, jsbus.DefaultActsStream)
}

func (b *bed) backlog() keeper.ActsBacklog {
	b.t.Helper()
	q, ok := b.k.Keeper.Acts().(keeper.ActsBacklog)
	if !ok {
		b.t.Fatalf("the keeper's acts (%T) have no queue", b.k.Keeper.Acts())
	}
	return q
}

// KEEPER_ACTS is removed while the keeper serves (requests still reach
// it): a snapshot, a list, a failing verify, a dry-run restore and a
// restore run meanwhile, their acts queue on disk; a discard-aside is
// refused, because its hand act cannot be acknowledged, and nothing is
// removed. Once the stream is made again, every act the keeper made
// arrives exactly once, in the order it made them.
func TestActsArriveOnceWhenTheActsStreamComesBack(t *testing.T) {
	b, log := actsBed(t, outbox.Options{})
	ctx := context.Background()
	if _, err := b.client.SnapshotKept(ctx, billing); err != nil {
		t.Fatal(err)
	}
	rep, err := b.client.RestoreKept(ctx, billing)
	if err != nil {
		t.Fatal(err)
	}
	aside := rep.Aside
	if aside == nil {
		t.Fatal("the restore made no aside")
	}
	before := len(b.storedActs())

	if err := b.js.DeleteStream(ctx, jsbus.DefaultActsStream); err != nil {
		t.Fatal(err)
	}
	second := billing
	second.Fingerprint = "b"
	if _, err := b.client.SnapshotKept(ctx, second); err != nil {
		t.Fatalf("a snapshot while the acts stream is gone: %v", err)
	}
	if _, err := b.client.ListKept(ctx, kept.Request{Module: "billing"}); err != nil {
		t.Fatal(err)
	}
	missing := billing
	missing.Fingerprint = "nope"
	if _, err := b.client.VerifyKept(ctx, missing); err == nil {
		t.Fatal("verify of a point that does not exist succeeded")
	}
	dry := billing
	dry.DryRun = true
	if _, err := b.client.RestoreKept(ctx, dry); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.RestoreKept(ctx, second); err != nil {
		t.Fatalf("a restore while the acts stream is gone: %v", err)
	}
	if n := b.backlog().ActsQueued(); n < 3 {
		t.Fatalf("%d acts queued while the acts stream is gone, want at least 3", n)
	}
	want(t, b.scrape(), `nats_keeper_acts_queued`, float64(b.backlog().ActsQueued()))

	_, err = b.client.DiscardAside(ctx, aside.ID, kept.Request{Caller: "ops-jane", Why: "no longer needed"})
	var verr *verbs.Error
	if !errors.As(err, &verr) || !strings.Contains(err.Error(), "could not be recorded") || !strings.Contains(err.Error(), "so nothing was removed") {
		t.Fatalf("discard-aside while its hand act cannot be acknowledged: %v, want a refusal that removed nothing", err)
	}
	if _, err := os.Stat(filepath.Join(b.dir, "aside", aside.ID, "bus.tar")); err != nil {
		t.Fatalf("the aside's archive after a refused discard: %v", err)
	}
	list, err := b.client.ListKept(ctx, kept.Request{Module: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list.Asides, func(a kept.Aside) bool { return a.ID == aside.ID }) {
		t.Fatalf("the aside %s is not listed after a refused discard", aside.ID)
	}

	if _, err := jsbus.New(ctx, b.nc, jsbus.WithLogger(slog.New(slog.DiscardHandler))); err != nil { // makes KEEPER_ACTS again
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for b.backlog().ActsQueued() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d acts still queued two minutes after the acts stream came back", b.backlog().ActsQueued())
		}
		time.Sleep(50 * time.Millisecond)
	}
	made, refused := loggedActs(t, log)
	if len(refused) != 1 {
		t.Errorf("the keeper logged %d acts it could not record, want 1 (the discard's intent): %v", len(refused), refused)
	}
	got := jstest.ActIDs(b.storedActs())
	if len(got) <= before {
		t.Fatalf("the acts stream holds %d acts, no more than the %d before it was removed", len(got), before)
	}
	// The stream was made again: it holds what came after its removal.
	if !slices.Equal(got, made[before:]) {
		t.Fatalf("the acts stream holds\n%v\nwant each act made since it was removed, once, in order:\n%v", got, made[before:])
	}
	t.Logf("%d acts before the acts stream was removed, %d made while it was gone or after, each stored once", before, len(got))
	for _, a := range b.storedActs() {
		if a.Outcome == "intent" {
			t.Errorf("a refused intent reached the acts stream: %+v", a)
		}
	}
	want(t, b.scrape(), `nats_keeper_acts_queued`, 0)
	want(t, b.scrape(), `nats_keeper_acts_dropped_total`, 0)
}

// A queue bounded at one act, KEEPER_ACTS gone: the first snapshot's act
// is queued, the second's is dropped, counted in /metrics and logged at
// error level.
func TestActsDroppedAtTheBoundAreCountedAndLogged(t *testing.T) {
	b, log := actsBed(t, outbox.Options{MaxActs: 1})
	ctx := context.Background()
	if err := b.js.DeleteStream(ctx, jsbus.DefaultActsStream); err != nil {
		t.Fatal(err)
	}
	for _, fp := range []string{"a", "b"} {
		r := billing
		r.Fingerprint = fp
		if _, err := b.client.SnapshotKept(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	m := b.scrape()
	want(t, m, `nats_keeper_acts_queued`, 1)
	want(t, m, `nats_keeper_acts_dropped_total`, 1)
	if !strings.Contains(log.String(), `"level":"ERROR","msg":"the acts queue is full, so this act is dropped: it is only in this log"`) {
		t.Errorf("the dropped act is not logged at error level:\n%s", log)
	}
}
