package testbed_test

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// A bed's keeper runs through the fault hooks a test sets, on the test's
// clock; a second keeper on the same bus and store sees its point.
func TestBedWithFaultsAndASecondKeeper(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	f := &fault.Bus{}
	b := testbed.New(t, testbed.WithClock(func() time.Time { return now }), testbed.WithConfig(f.Wrap),
		testbed.WithData(func(ctx context.Context, js jetstream.JetStream) error {
			return sample.Create(ctx, js, "billing", "ledger")
		}))
	var calls atomic.Int32
	injected := errors.New("injected")
	f.OnSnapshot(func(context.Context, string, io.WriteCloser, io.WriteCloser, fault.SnapshotFunc) error {
		calls.Add(1)
		return injected
	})
	r := keeper.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "fp", Caller: "test", Why: "testing"}
	if _, err := b.Keeper.SnapshotKept(b.Ctx, r); err == nil || calls.Load() == 0 {
		t.Fatalf("a snapshot through a failing hook: %v after %d calls; want a failure", err, calls.Load())
	}
	f.OnSnapshot(nil)
	rep, err := b.Keeper.SnapshotKept(b.Ctx, r)
	if err != nil {
		t.Fatalf("a snapshot once the hook is cleared: %v", err)
	}
	if !rep.Point.Taken.Equal(now) {
		t.Errorf("the point was taken at %v, not on the bed's clock (%v)", rep.Point.Taken, now)
	}
	other, err := b.KeeperOn(b.Dir, testbed.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	list, err := other.ListKept(b.Ctx, keeper.Request{Module: "billing"})
	if err != nil || len(list.Points) != 1 {
		t.Fatalf("the second keeper lists %+v, %v; want the one point", list, err)
	}
}

// No package but tests imports the test bed or the fakes.
func TestProductionImportsNoTestBed(t *testing.T) {
	goBin, err := tools.GoCommand()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "github.com/nats-keeper/nats-keeper/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	helpers := []string{"github.com/nats-keeper/nats-keeper/internal/testbed", "github.com/nats-keeper/nats-keeper/internal/fault"}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list listed %d packages:\n%s", len(lines), out)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		for _, dep := range f[1:] {
			for _, h := range helpers {
				if dep == h && f[0] != helpers[0] {
					t.Errorf("%s imports %s, a helper for tests", f[0], h)
				}
			}
		}
	}
}
