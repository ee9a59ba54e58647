package keeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// slowBus holds every snapshot until released, so a verb stays in flight.
type slowBus struct {
	started chan struct{}
	release chan struct{}
}

// wrap puts s in front of c's bus.
func (s *slowBus) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnSnapshot(func(ctx context.Context, stream string, data, meta io.WriteCloser, next fault.SnapshotFunc) error {
		select {
		case s.started <- struct{}{}:
		default:
		}
		<-s.release
		return next(ctx, stream, data, meta)
	})
}

func secondKeeper(t *testing.T, e *env, id string, ttl time.Duration) *keeper.Keeper {
	t.Helper()
	k, err := e.keeperOn(e.dir, func(c *keeper.Config) { c.ID, c.LeaseTTL = id, ttl })
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestLeaseAcrossKeepers(t *testing.T) {
	slow := &slowBus{started: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnv(t, func(c *keeper.Config) {
		slow.wrap(c)
		c.ID = "keeper-one"
		c.LeaseTTL = 600 * time.Millisecond // renewed every 200ms while the verb runs
	})
	other := secondKeeper(t, e, "keeper-two", time.Second)

	done := make(chan error, 1)
	go func() {
		r := req(1, "held")
		r.Caller = "ops-jane"
		_, err := e.k.SnapshotKept(e.ctx, r)
		done <- err
	}()
	<-slow.started
	time.Sleep(1500 * time.Millisecond) // past two lease lifetimes: only renewal keeps it
	_, err := other.SnapshotKept(e.ctx, req(1, "other"))
	if !errors.Is(err, keeper.ErrBusy) {
		t.Fatalf("second keeper: got %v, want busy", err)
	}
	mustContain(t, err.Error(), "keeper-one", "snapshot-kept", "ops-jane", "since", "nothing was done")
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatalf("first keeper's verb: %v", err)
	}
	if _, err := e.bus.Get(e.ctx, "lease."+module+"."+local); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("lease left after the verb: %v", err)
	}
	if _, err := other.SnapshotKept(e.ctx, req(1, "other")); err != nil {
		t.Fatalf("second keeper after release: %v", err)
	}
}

func TestExpiredLeaseIsTakenOver(t *testing.T) {
	e := newEnv(t)
	dead, _ := json.Marshal(map[string]any{"holder": "dead-keeper", "verb": "restore-kept",
		"since": time.Now().Add(-time.Hour), "expires": time.Now().Add(-time.Minute)})
	if _, err := e.bus.Create(e.ctx, "lease."+module+"."+local, dead); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.SnapshotKept(e.ctx, req(1, "after-death")); err != nil {
		t.Fatalf("verb after an expired lease: %v", err)
	}
	live, _ := json.Marshal(map[string]any{"holder": "live-keeper", "verb": "restore-kept",
		"since": time.Now(), "expires": time.Now().Add(time.Hour)})
	if _, err := e.bus.Create(e.ctx, "lease."+module+"."+local, live); err != nil {
		t.Fatal(err)
	}
	_, err := e.k.SnapshotKept(e.ctx, req(1, "during-life"))
	if !errors.Is(err, keeper.ErrBusy) {
		t.Fatalf("verb during a live lease: got %v, want busy", err)
	}
	mustContain(t, err.Error(), "live-keeper")
}

// TestRecoverWaitsForLiveLease: a journal whose kept data another keeper
// still leases is that keeper's restore in progress, not an interrupted one.
func TestRecoverWaitsForLiveLease(t *testing.T) {
	var hookOn bool
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(s string) {
			if hookOn && s == "journal-written" {
				panic(crash{s})
			}
		}
	})
	point := e.kept()
	e.snapshot(1, "fp")
	e.change()
	hookOn = true
	func() {
		defer func() { recover() }()
		e.k.RestoreKept(e.ctx, req(1, "fp"))
	}()
	hookOn = false
	live, _ := json.Marshal(map[string]any{"holder": "slow-keeper", "verb": "restore-kept",
		"since": time.Now(), "expires": time.Now().Add(time.Hour)})
	key := "lease." + module + "." + local
	if _, err := e.bus.Create(e.ctx, key, live); err != nil {
		t.Fatal(err)
	}
	k2 := secondKeeper(t, e, "keeper-two", time.Second)
	said, err := k2.Recover(e.ctx)
	if err != nil || len(said) != 0 { // a verb holds it: not interrupted, and not waiting
		t.Fatalf("recover under a live lease: %v %q", err, said)
	}
	_, rev, _ := e.bus.GetRev(e.ctx, key)
	expired, _ := json.Marshal(map[string]any{"holder": "slow-keeper", "verb": "restore-kept",
		"since": time.Now(), "expires": time.Now().Add(-time.Second)})
	if _, err := e.bus.Update(e.ctx, key, expired, rev); err != nil {
		t.Fatal(err)
	}
	said, err = k2.Recover(e.ctx)
	if err != nil || len(said.Said()) != 1 {
		t.Fatalf("recover after the lease expired: %v %q", err, said)
	}
	if d := diffKept(e, point); d != "" {
		t.Errorf("after recovery the kept data is not the point:\n%s", d)
	}
}

func TestLeaseOfDeadLocalKeeperIsReleased(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	key := "lease." + module + "." + local
	held := func(holder string) {
		t.Helper()
		v, _ := json.Marshal(map[string]any{"holder": holder, "verb": "restore-kept",
			"since": time.Now(), "expires": time.Now().Add(time.Hour)})
		if err := e.bus.Put(e.ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	held(fmt.Sprintf("%s:%d:dead", host, cmd.Process.Pid))
	if _, err := e.k.Recover(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bus.Get(e.ctx, key); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("the dead keeper's lease is still there: %v", err)
	}
	// A live holder on this host, and any holder elsewhere, keep theirs.
	for _, holder := range []string{fmt.Sprintf("%s:%d:live", host, os.Getppid()), "other-host:1:x"} {
		held(holder)
		if _, err := e.k.Recover(e.ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.bus.Get(e.ctx, key); err != nil {
			t.Fatalf("the lease of %s was released: %v", holder, err)
		}
	}
}
