package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// startConfiguredServer runs a nats-server process with JetStream and the
// given authorization block on a free loopback port, and returns its address
// (host:port).
func startConfiguredServer(t *testing.T, authorization string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	dir := t.TempDir()
	conf := fmt.Sprintf("listen: %q\njetstream { store_dir: %q }\n%s", addr, filepath.Join(dir, "store"), authorization)
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tools.NatsServer(t), "-c", path)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(2 * time.Minute) // a guard against hanging, not a measurement
	for {
		nc, err := nats.Connect("nats://admin:admin-secret@"+addr, nats.Timeout(time.Second))
		if err == nil {
			_, err = nc.Request("$JS.API.INFO", nil, 2*time.Second)
			nc.Close()
			if err == nil {
				return addr
			}
		}
		select {
		case <-exited:
			t.Fatalf("nats-server exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not answer: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A caller whose NATS user may not publish to a verb's subject is told so at
// once (exit 6, and ErrDenied from the Go client), not after its timeout;
// what it may do still works, and a subscription it may not make (progress)
// does not break a call.
func TestDeniedCallerIsToldAtOnce(t *testing.T) {
	conf := strings.Replace(readmePermissions(t), "users = [", `users = [
    { user: "admin", password: "admin-secret" }
    { user: "blind", password: "blind-secret",
      permissions: { publish: { allow: ["mesh-broker.list-kept", "mesh-broker.verify-kept"] }, subscribe: { allow: ["_INBOX.>"] } } }`, 1)
	addr := startConfiguredServer(t, conf)
	ctx := context.Background()
	keeperConn, err := nats.Connect("nats://keeper:keeper-secret@" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(keeperConn.Close)
	svc, err := startKeeper(ctx, keeperConn, keeperSetup{Store: dirStore(t, t.TempDir())}, quietLog())
	if err != nil {
		t.Fatalf("the README's keeper user cannot start the keeper: %v", err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	viewerURL := "nats://viewer:viewer-secret@" + addr

	// The CLI: exit 6 and the JSON error, long before a 2m timeout.
	code, out, errText := runArgs(t, "snapshot-kept", "billing", "ledger", "--form", "1", "--before", "f",
		"--server", viewerURL, "--timeout", "2m", "--json")
	if code != exitDenied {
		t.Fatalf("snapshot-kept as the viewer: exit %d, want %d\n%s%s", code, exitDenied, out, errText)
	}
	var eb verbs.ErrorBody
	if err := json.Unmarshal([]byte(out), &eb); err != nil || eb.Code != verbs.CodeDenied ||
		!strings.Contains(eb.Error, "may not publish to mesh-broker.snapshot-kept") || !strings.Contains(eb.Error, "nothing was done") {
		t.Fatalf("snapshot-kept --json as the viewer printed %q (%v)", out, err)
	}
	if code, out, errText := runArgs(t, "list", "--server", viewerURL, "--timeout", "2m"); code != exitOK {
		t.Fatalf("list as the viewer: exit %d\n%s%s", code, out, errText)
	}

	// The Go client, on a connection with an error handler of its own, which
	// still hears the violation.
	heard := make(chan error, 10)
	viewer, err := nats.Connect(viewerURL, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { heard <- err }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viewer.Close)
	c := verbs.NewClient(viewer, verbs.WithTimeout(2*time.Minute))
	_, err = c.RestoreKept(ctx, kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "f", Why: "test", Caller: "test"})
	if !errors.Is(err, kept.ErrDenied) || !strings.Contains(err.Error(), "may not publish to mesh-broker.restore-kept") {
		t.Fatalf("restore-kept as the viewer: %v", err)
	}
	if herr := <-heard; !errors.Is(herr, nats.ErrPermissionViolation) {
		t.Fatalf("the connection's own handler heard %v", herr)
	}
	if _, err := c.ListKept(ctx, kept.Request{}); err != nil {
		t.Fatalf("list-kept as the viewer after a refusal: %v", err)
	}

	// A user that may not watch progress: the server refuses the
	// subscription, and the call still works, from Go and from the CLI.
	blindHeard := make(chan error, 10)
	blind, err := nats.Connect("nats://blind:blind-secret@"+addr,
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { blindHeard <- err }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(blind.Close)
	bc := verbs.NewClient(blind, verbs.WithTimeout(2*time.Minute))
	stop, err := bc.WatchProgress("billing", "ledger", func(kept.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if herr := <-blindHeard; !strings.Contains(herr.Error(), `Subscription to "mesh-broker.progress.billing.ledger"`) {
		t.Fatalf("the progress subscription was not refused: %v", herr)
	}
	if _, err := bc.ListKept(ctx, kept.Request{Module: "billing", Local: "ledger"}); err != nil {
		t.Fatalf("list-kept by a user whose progress subscription was refused: %v", err)
	}
	var o outs
	f := clientFlags{Conn: connFlags{Server: "nats://blind:blind-secret@" + addr}, Prefix: verbs.DefaultPrefix, Timeout: 2 * time.Minute, Caller: "test"}
	o2 := o.output()
	o2.Progress = true
	if err := callVerb(ctx, f, o2, kept.VerbList, kept.Request{Module: "billing", Local: "ledger"}, printList); err != nil {
		t.Fatalf("list-kept billing ledger with progress, as a user that may not watch it: %v\n%s", err, o.err.String())
	}
	if !strings.Contains(o.out.String(), "restore point(s)") {
		t.Fatalf("list-kept printed %q", o.out.String())
	}
}
