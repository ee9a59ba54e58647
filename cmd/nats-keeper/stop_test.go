package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// buildKeeper builds the nats-keeper binary into a temporary directory, with
// the test hooks (-tags testhooks: crashhook.go) the process tests set through
// the environment.
func buildKeeper(t *testing.T) string {
	t.Helper()
	goBin, err := tools.GoCommand()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nats-keeper")
	if out, err := exec.Command(goBin, "build", "-tags", "testhooks", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build nats-keeper: %v\n%s", err, out)
	}
	return bin
}

// childEnv is the test's environment without NATS_ settings, plus extra.
func childEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config")), extra...)
}

// SIGTERM ends a `nats-keeper serve` whose verb is stuck: after --stop-timeout
// the verb's context is cancelled, the caller gets a failure reply, and the
// keeper exits 1 saying the verb was cut short.
func TestServeStopsAStuckVerbOnSIGTERM(t *testing.T) {
	bin := buildKeeper(t)
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	home := t.TempDir()
	cmd := exec.Command(bin, "serve", "--server", s.ClientURL(), "--dir", filepath.Join(home, "keeper"),
		"--stop-timeout", "1s", "--log-format", "json")
	cmd.Env = childEnv(home, "NATS_KEEPER_TEST_HANG_VERB="+kept.VerbList)
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("nats-keeper serve:\n%s", logs.String())
		}
	})
	// A guard against hanging, not a measurement.
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			select {
			case err := <-exited:
				t.Fatalf("nats-keeper serve exited (%v) while waiting for %s", err, what)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("service answering PING", func() bool {
		_, err := nc.Request("$SRV.PING."+verbs.ServiceName, nil, time.Second)
		return err == nil
	})
	replied := make(chan error, 1)
	go func() {
		_, err := verbs.NewClient(nc, verbs.WithTimeout(2*time.Minute)).ListKept(context.Background(), kept.Request{Caller: "test"})
		replied <- err
	}()
	waitUntil("stuck verb", func() bool {
		return strings.Contains(logs.String(), "hang test: the verb waits for its context to end")
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute): // a guard against hanging, not a measurement
		t.Fatal("nats-keeper serve did not exit after SIGTERM")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailed {
		t.Fatalf("nats-keeper serve ended with %v, want exit %d", err, exitFailed)
	}
	out := logs.String()
	for _, want := range []string{"cancelling it", `"verb":"list-kept"`, "were cut short (list-kept)", "a restarted keeper finishes or undoes"} {
		if !strings.Contains(out, want) {
			t.Errorf("the keeper's output lacks %q", want)
		}
	}
	rerr := <-replied
	var ve *verbs.Error
	if !errors.As(rerr, &ve) || ve.Code != verbs.CodeFailed || !strings.Contains(ve.Said, "context canceled") {
		t.Fatalf("the stuck verb's caller got %v", rerr)
	}
	if _, err := nc.Request("$SRV.PING."+verbs.ServiceName, nil, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("the keeper still answers after it exited: %v", err)
	}
}
