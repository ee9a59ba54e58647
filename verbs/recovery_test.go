package verbs_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store/filestore"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// deathBed is a bus with billing/ledger and its point f1-before, and a keeper
// that "dies" at its first restore (its connection is closed once the first
// live stream is removed, and the verb hangs there); then another keeper on
// the same bus and store starts, as a restarted one would, and looks for
// interrupted restores faster than every 15s.
type deathBed struct {
	ctx     context.Context
	c       *verbs.Client
	dies    *wiring.Keeper
	req     kept.Request
	started chan *wiring.Keeper
}

func newDeathBed(t *testing.T) *deathBed {
	t.Helper()
	b := &deathBed{ctx: t.Context(), started: make(chan *wiring.Keeper, 1),
		req: kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "before", Caller: "test", Why: "the migration failed"}}
	srv := natstest.Start(t, nil)
	ncDies, ncOther, ncClient := natstest.Connect(t, srv), natstest.Connect(t, srv), natstest.Connect(t, srv)
	js, err := jetstream.New(ncClient)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(b.ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hung, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.dies = startKeeper(t, ncDies, dir, func(step string) {
		if strings.HasPrefix(step, "removed:") {
			once.Do(func() {
				ncDies.Close() // the keeper is gone from the bus: no beats, no PING, no reply
				close(hung)
				<-release
			})
		}
	})
	t.Cleanup(func() { close(release) }) // first: the hung verb ends, so its keeper stops
	b.c = verbs.NewClient(ncClient, verbs.WithTimeout(10*time.Minute), verbs.WithRecoveryWait(time.Minute))
	if _, err := b.c.SnapshotKept(b.ctx, b.req); err != nil {
		t.Fatal(err)
	}
	go func() {
		<-hung
		other, err := wiring.Start(b.ctx, ncOther, setup(t, dir, nil), verbs.WithStopTimeout(time.Second))
		if err != nil {
			t.Errorf("the other keeper did not start: %v", err)
			b.started <- nil
			return
		}
		t.Cleanup(func() { _ = other.Stop() })
		b.started <- other // the test waits for it (told), so it ends after the cleanup is set
		for b.ctx.Err() == nil {
			if said, _ := other.Keeper.Recover(b.ctx); len(said) > 0 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return b
}

// told checks that said tells that the dying keeper cut the restore short
// and recovery finished it, naming aside, and that it came within seconds.
func (b *deathBed) told(t *testing.T, said, aside string, took time.Duration) {
	t.Helper()
	<-b.started
	if !strings.HasPrefix(aside, "billing.ledger.") {
		t.Errorf("no aside named: %q", aside)
	}
	for _, want := range []string{"restore-kept of billing/ledger was cut short: the keeper that ran it (nats-keeper service " + b.dies.Service.Info().ID + ") stopped answering",
		"recovery finished it", aside} {
		if !strings.Contains(said, want) {
			t.Errorf("the sentence lacks %q:\n%s", want, said)
		}
	}
	// The issue allows this timed assertion: within seconds of the death
	// (beats stop, 3s of silence, the PING, the 1s lease running out, the
	// other keeper's recovery), not at the end of the 10-minute timeout.
	if took > 45*time.Second {
		t.Fatalf("the client was told after %s", took)
	}
	t.Logf("told after %s: %s", took.Round(time.Millisecond), said)
}

// A keeper dies mid-restore and another recovers it: the client that asked
// is told within seconds that recovery finished it, with the aside that
// holds the live data as it was.
func TestClientToldTheOutcomeWhenAnotherKeeperRecovers(t *testing.T) {
	b := newDeathBed(t)
	start := time.Now()
	rep, err := b.c.RestoreKept(b.ctx, b.req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("restore whose keeper died, recovered by another: %v", err)
	}
	if rep.Aside == nil {
		t.Fatalf("the reply names no aside: %+v", rep)
	}
	b.told(t, rep.Said, rep.Aside.ID, took)
}

// Guard does the same: its change fails, the keeper restoring the point
// dies, another finishes the restore, and guard reports the point restored
// and the aside.
func TestGuardToldTheOutcomeWhenAnotherKeeperRecovers(t *testing.T) {
	b := newDeathBed(t)
	start := time.Now()
	res, err := b.c.Guard(b.ctx, verbs.GuardRequest{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "before", Caller: "test"},
		func(context.Context) error { return errors.New("the migration failed") })
	took := time.Since(start)
	var ge *verbs.GuardError
	if !errors.As(err, &ge) || ge.Restore != nil || res.Restored == nil {
		t.Fatalf("guard whose restoring keeper died, recovered by another: %+v, %v", res, err)
	}
	b.told(t, res.Restored.Said, res.Aside, took)
}

// setup is a keeper's setup with its store in dir and short leases.
func setup(t *testing.T, dir string, hook func(string)) wiring.Setup {
	st, err := filestore.Open(dir)
	if err != nil {
		t.Errorf("opening the store %s: %v", dir, err)
		return wiring.Setup{}
	}
	t.Cleanup(func() { _ = st.Close() })
	return wiring.Setup{Store: st, StepHook: hook, LeaseTTL: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// startKeeper starts a keeper on nc with its store in dir and short leases.
func startKeeper(t *testing.T, nc *nats.Conn, dir string, hook func(string)) *wiring.Keeper {
	t.Helper()
	k, err := wiring.Start(context.Background(), nc, setup(t, dir, hook), verbs.WithStopTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop() })
	return k
}
