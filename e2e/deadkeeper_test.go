package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// `nats-keeper restore-kept` whose keeper is killed (SIGKILL, by its own step
// hook, once the first live stream is removed) is told within seconds, with
// the documented exit code and sentence: first with no other keeper to
// recover it and a short --recovery-wait, exit 8, cut short, naming the aside
// of the journal; then with a second keeper serving, which finishes the
// restore, exit 0, saying recovery finished it and naming the aside.
func TestRestoreWhoseKeeperDies(t *testing.T) {
	const module, local = "dead", "keeper"
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "keeper")
	srv := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	nc := connect(t, srv.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(context.Background(), js, module, local); err != nil {
		t.Fatal(err)
	}
	crash := "NATS_KEEPER_CRASH_AT=removed:" + sample.NamesOf(module, local).KVStream
	lone := startKeeper(t, srv.url(), dir, tmp, crash)
	waitKeepers(t, nc, 1, lone)
	mustCall(t, nc, "snapshot-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "before", "caller": "e2e"})

	// Alone: nothing recovers it within the wait.
	code, out, took := restoreCLI(t, srv.url(), tmp, module, local, "--recovery-wait", "3s")
	if code != 8 || !strings.Contains(out, "restore-kept of dead/keeper was cut short: the keeper that ran it") ||
		!strings.Contains(out, "no keeper finished or undid it") || !strings.Contains(out, "set aside as dead.keeper.") {
		t.Fatalf("restore-kept whose lone keeper died: exit %d after %s:\n%s\nthe keeper:\n%s", code, took, out, tail(lone.p.log.String()))
	}
	// The issue allows these timed assertions: within seconds, not the
	// 10-minute --timeout.
	if took > 40*time.Second {
		t.Fatalf("told after %s", took)
	}
	t.Logf("alone, told after %s: %s", took.Round(time.Millisecond), out)

	// Two keepers serve; whichever takes the restore dies, and the other
	// finishes it (recovery of the first restore runs at their start).
	a := startKeeper(t, srv.url(), dir, tmp, crash)
	b := startKeeper(t, srv.url(), dir, tmp, crash)
	waitKeepers(t, nc, 2, a, b)
	waitNoJournal(t, js, module, local)
	code, out, took = restoreCLI(t, srv.url(), tmp, module, local)
	var rep struct {
		Said  string `json:"said"`
		Aside struct {
			ID string `json:"id"`
		} `json:"aside"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !strings.HasPrefix(rep.Aside.ID, "dead.keeper.") ||
		!strings.Contains(rep.Said, "was cut short") || !strings.Contains(rep.Said, "recovery finished it") {
		t.Fatalf("restore-kept whose keeper died beside another: exit %d after %s:\n%s\nkeeper a:\n%s\nkeeper b:\n%s",
			code, took, out, tail(a.p.log.String()), tail(b.p.log.String()))
	}
	if a.p.done() == b.p.done() {
		t.Fatalf("one keeper should have died and one served (a ended: %v, b ended: %v)", a.p.done(), b.p.done())
	}
	if took > 60*time.Second { // a serving keeper looks for interrupted restores every 15s
		t.Fatalf("told after %s", took)
	}
	t.Logf("beside another keeper, told after %s: %s", took.Round(time.Millisecond), rep.Said)
}

// restoreCLI runs `nats-keeper restore-kept --json` of module/local's point
// f1-before with extra flags, and returns its exit code, its output and how
// long it took.
func restoreCLI(t *testing.T, url, home, module, local string, extra ...string) (int, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a guard against hanging
	defer cancel()
	args := append([]string{"restore-kept", module, local, "--form", "1", "--before", "before", "--why", "the migration failed",
		"--server", url, "--json"}, extra...)
	cmd := exec.CommandContext(ctx, keeperBin, args...)
	cmd.Env = cleanEnv(home)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out), took
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out), took
	}
	t.Fatalf("nats-keeper restore-kept: %v\n%s", err, out)
	return 0, "", 0
}

// waitNoJournal waits until no restore journal of module/local is left in
// the index (recovery finishes or undoes what a dead keeper's restore
// left), up to 3 minutes. The cluster test (clusterkill) uses it too.
func waitNoJournal(t *testing.T, js jetstream.JetStream, module, local string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		kv, err := js.KeyValue(ctx, "kept")
		if err == nil {
			_, err = kv.Get(ctx, "journal."+module+"."+local)
		}
		cancel()
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restore journal of %s/%s is still in the index after 3 minutes (%v)", module, local, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
