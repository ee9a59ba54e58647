package verbs_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/inproc"
	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store/filestore"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// A keeper "dies" mid-restore (its connection is closed once the first live
// stream is removed, and the verb hangs there), and another keeper on the
// same bus and store recovers the restore: the client that asked is told
// within seconds, not at the end of its 10-minute timeout, that recovery
// finished it, with the aside that holds the live data as it was.
func TestClientToldTheOutcomeWhenAnotherKeeperRecovers(t *testing.T) {
	ctx := t.Context()
	srv := natstest.Start(t, nil)
	ncDies, ncOther, ncClient := natstest.Connect(t, srv), natstest.Connect(t, srv), natstest.Connect(t, srv)
	js, err := jetstream.New(ncClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hung, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	dies := startKeeper(t, ncDies, dir, func(step string) {
		if strings.HasPrefix(step, "removed:") {
			once.Do(func() {
				ncDies.Close() // the keeper is gone from the bus: no beats, no PING, no reply
				close(hung)
				<-release
			})
		}
	})
	t.Cleanup(func() { close(release) }) // first: the hung verb ends, so its keeper stops
	c := verbs.NewClient(ncClient, verbs.WithTimeout(10*time.Minute), verbs.WithRecoveryWait(time.Minute))
	r := keeper.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "before", Caller: "test", Why: "the migration failed"}
	if _, err := c.SnapshotKept(ctx, r); err != nil {
		t.Fatal(err)
	}
	started := make(chan *inproc.Keeper, 1)
	go func() { // another keeper starts, as a restarted one would, and looks for interrupted restores faster than every 15s
		<-hung
		other, err := inproc.Start(ctx, ncOther, setup(t, dir, nil), verbs.WithStopTimeout(time.Second))
		started <- other
		if err != nil {
			t.Errorf("the other keeper did not start: %v", err)
			return
		}
		for ctx.Err() == nil {
			if said, _ := other.Keeper.Recover(ctx); len(said) > 0 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	start := time.Now()
	rep, err := c.RestoreKept(ctx, r)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("restore whose keeper died, recovered by another: %v", err)
	}
	if rep.Aside == nil || !strings.HasPrefix(rep.Aside.ID, "billing.ledger.") {
		t.Fatalf("the reply names no aside: %+v", rep)
	}
	for _, want := range []string{"restore-kept of billing/ledger was cut short: the keeper that ran it (nats-keeper service " + dies.Service.Info().ID + ") stopped answering",
		"recovery finished it", rep.Aside.ID} {
		if !strings.Contains(rep.Said, want) {
			t.Errorf("the reply's sentence lacks %q:\n%s", want, rep.Said)
		}
	}
	if other := <-started; other != nil {
		_ = other.Stop()
	}
	// The issue allows this timed assertion: within seconds of the death
	// (beats stop, 3s of silence, the PING, the 1s lease running out, the
	// other keeper's recovery), not at the end of the timeout.
	if took > 45*time.Second {
		t.Fatalf("the client was told after %s", took)
	}
	t.Logf("told after %s: %s", took.Round(time.Millisecond), rep.Said)
}

// setup is a keeper's setup with its store in dir and short leases.
func setup(t *testing.T, dir string, hook func(string)) inproc.Setup {
	st, err := filestore.Open(dir)
	if err != nil {
		t.Errorf("opening the store %s: %v", dir, err)
		return inproc.Setup{}
	}
	t.Cleanup(func() { _ = st.Close() })
	return inproc.Setup{Store: st, StepHook: hook, LeaseTTL: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// startKeeper starts a keeper on nc with its store in dir and short leases.
func startKeeper(t *testing.T, nc *nats.Conn, dir string, hook func(string)) *inproc.Keeper {
	t.Helper()
	k, err := inproc.Start(context.Background(), nc, setup(t, dir, hook), verbs.WithStopTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop() })
	return k
}
