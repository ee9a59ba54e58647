package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// TestEndToEnd runs the built nats-keeper binary against a nats-server
// process, and drives it with the standard nats CLI, as an operator would.
func TestEndToEnd(t *testing.T) {
	natsCLI := tools.NatsCLI(t)
	natsServer := tools.NatsServer(t)
	keeperBin := buildKeeper(t)
	tmp := t.TempDir()

	url := startServerProcess(t, natsServer, filepath.Join(tmp, "store"))
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	var keeperLog syncBuffer
	serve := exec.Command(keeperBin, "serve", "--server", url, "--dir", filepath.Join(tmp, "keeper"), "--log-format", "json")
	serve.Stdout, serve.Stderr = &keeperLog, &keeperLog
	serve.Env = cleanEnv(tmp)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() {
		if serve.ProcessState == nil {
			_ = serve.Process.Kill()
			<-exited
		}
	})
	waitForService(t, nc, exited, &keeperLog)

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
	if rep, _ := m["report"].(map[string]any); rep == nil || rep["ok"] != true {
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

	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("nats-keeper serve after SIGTERM: %v\n%s", err, keeperLog.String())
	}
	if !strings.Contains(keeperLog.String(), "every verb in flight finished") {
		t.Errorf("the keeper did not log its clean stop:\n%s", keeperLog.String())
	}
}

// buildKeeper builds the nats-keeper binary into a temporary directory.
func buildKeeper(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "nats-keeper")
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build nats-keeper: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv keeps the child processes away from the user's nats contexts.
func cleanEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NATS_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
}

// startServerProcess runs nats-server with JetStream on 127.0.0.1 and a free
// port, and returns its URL once it accepts connections.
func startServerProcess(t *testing.T, bin, store string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var log syncBuffer
	cmd := exec.Command(bin, "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-sd", store)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
	})
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for i := 0; ; i++ {
		select {
		case err := <-done:
			t.Fatalf("nats-server exited: %v\n%s", err, log.String())
		default:
		}
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
			return url
		}
		if i == 300 {
			t.Fatalf("nats-server did not accept connections: %v\n%s", err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForService waits until a nats-keeper answers the micro PING.
func waitForService(t *testing.T, nc *nats.Conn, exited chan error, log *syncBuffer) {
	t.Helper()
	for i := 0; ; i++ {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("nats-keeper serve exited: %v\n%s", err, log.String())
		default:
		}
		if _, err := nc.Request("$SRV.PING."+verbs.ServiceName, nil, time.Second); err == nil {
			return
		}
		if i == 300 {
			t.Fatalf("nats-keeper never answered:\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer a child process may write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
