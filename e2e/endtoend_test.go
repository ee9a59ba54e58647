package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// TestEndToEnd runs the built nats-keeper binary against a nats-server
// process, and drives it with the standard nats CLI, as an operator would.
func TestEndToEnd(t *testing.T) {
	natsCLI := tools.NatsCLI(t)
	tmp := t.TempDir()

	url := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store")).url()
	nc := connect(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	serve := startKeeper(t, url, filepath.Join(tmp, "keeper"), tmp)
	waitKeepers(t, nc, 1, serve)

	ctx := context.Background()
	if err := sample.Create(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	names := sample.NamesOf("billing", "ledger")
	before, err := sample.Dump(ctx, js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}

	nreq := func(verb, body string) map[string]any {
		t.Helper()
		cmd := exec.Command(natsCLI, "--server", url, "--timeout", "2m", "request", "--raw", "--no-templates",
			verbs.DefaultPrefix+"."+verb, body)
		cmd.Env = cleanEnv(tmp)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nats request %s %s: %v\n%s", verb, body, err, out)
		}
		var m map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(out), &m); err != nil {
			t.Fatalf("nats request %s: reply %q is not JSON: %v", verb, out, err)
		}
		return m
	}
	said := func(m map[string]any) string { s, _ := m["said"].(string); return s }

	snap := `{"module":"billing","local":"ledger","form":3,"fingerprint":"9f2c1a7e","catch-up":"ledger-migrate-3-to-4","caller":"e2e"}`
	if m := nreq("snapshot-kept", snap); said(m) == "" || m["point"] == nil {
		t.Fatalf("snapshot-kept replied %v", m)
	}
	if _, err := os.Stat(filepath.Join(tmp, "keeper", "points", "billing", "ledger", "f3-9f2c1a7e", "bus.tar")); err != nil {
		t.Fatalf("the restore point is not on disk: %v", err)
	}
	if m := nreq("list-kept", `{"module":"billing"}`); len(m["points"].([]any)) != 1 {
		t.Fatalf("list-kept replied %v", m)
	}
	m := nreq("verify-kept", `{"module":"billing","local":"ledger","form":3,"fingerprint":"9f2c1a7e"}`)
	if rep, _ := m["report"].(map[string]any); rep == nil || rep["bytes"] == nil || !strings.Contains(fmt.Sprint(m["said"]), "verifies") {
		t.Fatalf("verify-kept replied %v", m)
	}

	if err := sample.Change(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	m = nreq("restore-kept", `{"module":"billing","local":"ledger","form":3,"fingerprint":"9f2c1a7e","why":"e2e roll back","caller":"e2e"}`)
	aside, _ := m["aside"].(map[string]any)
	if aside == nil || aside["id"] == "" || m["catch-up"] != "ledger-migrate-3-to-4" {
		t.Fatalf("restore-kept replied %v", m)
	}
	after, err := sample.Dump(ctx, js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, after); d != "" {
		t.Fatalf("after restore-kept the data differs from the restore point:\n%s", d)
	}
	id := aside["id"].(string)
	if m := nreq("discard-aside", fmt.Sprintf(`{"from":%q,"why":"checked by e2e","caller":"e2e"}`, id)); !strings.Contains(said(m), id) {
		t.Fatalf("discard-aside replied %v", m)
	}
	if _, err := os.Stat(filepath.Join(tmp, "keeper", "aside", id)); !os.IsNotExist(err) {
		t.Fatalf("the discarded aside is still on disk: %v", err)
	}

	// Refusals come back as the error body with the code.
	for body, code := range map[string]float64{
		`{"module":"billing","local":"ledger","form":3,"fingerprint":"9f2c1a7e","surprise":1}`: 400,
		`{"module":"../etc","local":"ledger","form":3,"fingerprint":"x"}`:                      400,
		`{"module":"billing","local":"ledger","form":4,"fingerprint":"nope"}`:                  404,
	} {
		if m := nreq("verify-kept", body); m["code"] != code || m["error"] == "" {
			t.Errorf("verify-kept %s replied %v, want code %v", body, m, code)
		}
	}

	for _, args := range [][]string{{"micro", "ls"}, {"micro", "info", "nats-keeper"}, {"micro", "stats", "nats-keeper"}} {
		cmd := exec.Command(natsCLI, append([]string{"--server", url}, args...)...)
		cmd.Env = cleanEnv(tmp)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "nats-keeper") {
			t.Fatalf("nats %v: %v\n%s", args, err, out)
		}
		if args[1] == "info" && !strings.Contains(string(out), "mesh-broker.restore-kept") {
			t.Fatalf("nats micro info does not list the endpoints:\n%s", out)
		}
	}

	serve.p.stop(t, syscall.SIGTERM, time.Minute)
	if serve.p.err != nil {
		t.Fatalf("nats-keeper serve after SIGTERM: %v\n%s", serve.p.err, tail(serve.p.log.String()))
	}
	if !strings.Contains(serve.p.log.String(), "every verb in flight finished") {
		t.Errorf("the keeper did not log its clean stop:\n%s", tail(serve.p.log.String()))
	}
}
