package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// guardedEnv makes the test binary act as the command guard runs (a
// migration) instead of running tests: guardedMigration.
const guardedEnv = "NATS_KEEPER_TEST_GUARDED"

func TestMain(m *testing.M) {
	if os.Getenv(guardedEnv) == "1" {
		os.Exit(guardedMigration(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// guardedMigration is the migration guard's tests run: with arguments URL
// DIR THEN it writes DIR/ran and its NATS_KEEPER_ environment to DIR/env,
// sets o1 to v2 in the KV bucket shop_orders, and then, by THEN: exit=N
// exits N; kill exits by SIGKILL; wait writes DIR/waiting and waits for a
// SIGINT or SIGTERM, which it records in DIR/got before it exits 9.
func guardedMigration(args []string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "guarded migration:", err); return 100 }
	if len(args) != 3 {
		return fail(fmt.Errorf("want URL DIR THEN, got %q", args))
	}
	url, dir, then := args[0], args[1], args[2]
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if err := os.WriteFile(filepath.Join(dir, "ran"), nil, 0o600); err != nil {
		return fail(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NATS_KEEPER_") {
			env = append(env, kv)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(strings.Join(env, "\n")), 0o600); err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	kv, err := js.KeyValue(ctx, "shop_orders")
	if err != nil {
		return fail(err)
	}
	if _, err := kv.PutString(ctx, "o1", "v2"); err != nil {
		return fail(err)
	}
	fmt.Println("migrated o1 to v2")
	switch {
	case strings.HasPrefix(then, "exit="):
		n, _ := strconv.Atoi(strings.TrimPrefix(then, "exit="))
		return n
	case then == "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case then == "wait":
		if err := os.WriteFile(filepath.Join(dir, "waiting"), nil, 0o600); err != nil {
			return fail(err)
		}
		select {
		case s := <-sigs:
			_ = os.WriteFile(filepath.Join(dir, "got"), []byte(s.String()), 0o600)
			return 9
		case <-time.After(2 * time.Minute): // a guard against hanging
			return fail(errors.New("no signal came"))
		}
	}
	return fail(fmt.Errorf("THEN %q is not exit=N, kill or wait", then))
}

// guardBed is a keeper with module shop's KV bucket shop_orders (o1=v1),
// the nats-keeper binary and the test binary as the guarded command.
type guardBed struct {
	*bed
	bin, exe, home string
	kv             jetstream.KeyValue
}

func newGuardBed(t *testing.T) *guardBed {
	t.Helper()
	b := newBed(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kv, err := b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "shop_orders"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "o1", "v1"); err != nil {
		t.Fatal(err)
	}
	return &guardBed{bed: b, bin: buildKeeper(t), exe: exe, home: t.TempDir(), kv: kv}
}

func (g *guardBed) o1(t *testing.T) string {
	t.Helper()
	e, err := g.kv.Get(context.Background(), "o1")
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value())
}

func (g *guardBed) asides(t *testing.T) []kept.Aside {
	t.Helper()
	rep, err := verbs.NewClient(g.nc).ListKept(context.Background(), kept.Request{Module: "shop", Local: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Asides
}

// guardCmd is `nats-keeper guard shop orders ... -- <test binary> URL DIR
// then`, flags before the --.
func (g *guardBed) guardCmd(dir, then string, flags ...string) *exec.Cmd {
	args := append([]string{"guard", "shop", "orders", "--server", g.url, "--form", "1", "--before", "v2",
		"--catch-up", "orders-1-to-2", "--caller", "test"}, flags...)
	args = append(args, "--", g.exe, g.url, dir, then)
	cmd := exec.Command(g.bin, args...)
	cmd.Env = childEnv(g.home, guardedEnv+"=1")
	return cmd
}

// runGuardProc runs cmd to its end and returns its exit code and output.
func runGuardProc(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var out, errb syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute): // a guard against hanging, not a measurement
		_ = cmd.Process.Kill()
		t.Fatalf("guard did not end\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// A command that exits 0 leaves the migrated data; it ran with the point's
// details in its environment.
func TestGuardProcessSuccessKeepsTheChange(t *testing.T) {
	g := newGuardBed(t)
	dir := t.TempDir()
	code, out, errText := runGuardProc(t, g.guardCmd(dir, "exit=0"))
	if code != 0 {
		t.Fatalf("guard exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errText)
	}
	if got := g.o1(t); got != "v2" {
		t.Fatalf("o1 = %q, want the migrated v2", got)
	}
	if a := g.asides(t); len(a) != 0 {
		t.Fatalf("asides %+v after a command that exited 0", a)
	}
	mustContain(t, "guard's output", out, "migrated o1 to v2", "the change succeeded, so the point was not restored")
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the command's environment", string(env), "NATS_KEEPER_POINT=points/shop/orders/f1-v2",
		"NATS_KEEPER_MODULE=shop", "NATS_KEEPER_LOCAL=orders", "NATS_KEEPER_FORM=1", "NATS_KEEPER_FINGERPRINT=v2",
		"NATS_KEEPER_CATCH_UP=orders-1-to-2", "NATS_KEEPER_STREAMS=KV_shop_orders", "NATS_KEEPER_PREFIX=mesh-broker",
		"NATS_KEEPER_POINT_TAKEN=20")
}

// A command that exits 3 is undone: guard restores and exits 3, printing
// the aside and the catch-up tool.
func TestGuardProcessExit3Restores(t *testing.T) {
	g := newGuardBed(t)
	code, out, errText := runGuardProc(t, g.guardCmd(t.TempDir(), "exit=3"))
	if code != 3 {
		t.Fatalf("guard exited %d, want the command's 3\nstdout:\n%s\nstderr:\n%s", code, out, errText)
	}
	if got := g.o1(t); got != "v1" {
		t.Fatalf("o1 = %q after the restore, want v1", got)
	}
	a := g.asides(t)
	if len(a) != 1 || a[0].Why != "guard: "+g.exe+" exited 3" {
		t.Fatalf("asides %+v, want one with why %q", a, "guard: "+g.exe+" exited 3")
	}
	mustContain(t, "guard's output", out, "exited 3", "so the restore point was restored", "aside:     "+a[0].ID, "catch-up:  run orders-1-to-2 next")
	mustContain(t, "guard's stderr", errText, "nats-keeper: guard: the change of shop/orders form 1 before v2 failed")
}

// A command killed by a signal is undone too; --json returns the outcome.
func TestGuardProcessKilledRestores(t *testing.T) {
	g := newGuardBed(t)
	code, out, errText := runGuardProc(t, g.guardCmd(t.TempDir(), "kill", "--json"))
	if code != 128+int(syscall.SIGKILL) {
		t.Fatalf("guard exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, 128+int(syscall.SIGKILL), out, errText)
	}
	if got := g.o1(t); got != "v1" {
		t.Fatalf("o1 = %q after the restore, want v1", got)
	}
	var res guardJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not guard's JSON (%v):\n%s", err, out)
	}
	if res.ExitCode != 137 || res.Signal != "SIGKILL" || !res.Ran || res.Restored == nil || res.Aside == "" ||
		res.CatchUp != "orders-1-to-2" || res.Failed != g.exe+" was killed by SIGKILL" {
		t.Fatalf("JSON %+v", res)
	}
	if a := g.asides(t); len(a) != 1 || a[0].ID != res.Aside || a[0].Why != "guard: "+g.exe+" was killed by SIGKILL" {
		t.Fatalf("asides %+v", a)
	}
	mustContain(t, "guard's stderr", errText, "migrated o1 to v2") // the command's stdout, with --json
}

// No point, no command: when the snapshot fails the command never runs.
func TestGuardProcessWithoutAPointRunsNothing(t *testing.T) {
	g := newGuardBed(t)
	for _, c := range []struct {
		name  string
		flags []string
		code  int
		say   string
	}{
		{"no such kept data", nil, exitNotFound, "so the change did not run"},
		{"no keeper answers", []string{"--prefix", "nobody.here"}, exitNoService, "so the change did not run"},
	} {
		dir := t.TempDir()
		cmd := g.guardCmd(dir, "exit=0", c.flags...)
		if c.name == "no such kept data" {
			cmd.Args[3] = "missing" // shop/missing has no data on the bus
		}
		code, out, errText := runGuardProc(t, cmd)
		if code != c.code {
			t.Fatalf("%s: guard exited %d, want %d\nstdout:\n%s\nstderr:\n%s", c.name, code, c.code, out, errText)
		}
		if exists(filepath.Join(dir, "ran")) {
			t.Fatalf("%s: the command ran without a point", c.name)
		}
		mustContain(t, c.name, errText, c.say)
	}
	if got := g.o1(t); got != "v1" {
		t.Fatalf("o1 = %q, want v1 untouched", got)
	}
}

// SIGTERM to guard is passed to the command; guard then restores, unless
// --no-restore-on-signal.
func TestGuardProcessPassesSIGTERM(t *testing.T) {
	g := newGuardBed(t)
	for _, noRestore := range []bool{false, true} {
		if _, err := g.kv.PutString(context.Background(), "o1", "v1"); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		var flags []string
		if noRestore {
			flags = []string{"--no-restore-on-signal"}
		}
		cmd := g.guardCmd(dir, "wait", flags...)
		var out, errb syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for deadline := time.Now().Add(2 * time.Minute); !exists(filepath.Join(dir, "waiting")); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) { // a guard against hanging
				_ = cmd.Process.Kill()
				t.Fatalf("the command did not start\n%s\n%s", out.String(), errb.String())
			}
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil { // to guard only
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(3 * time.Minute): // a guard against hanging
			_ = cmd.Process.Kill()
			t.Fatalf("guard did not end after SIGTERM\n%s\n%s", out.String(), errb.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 9 {
			t.Fatalf("no-restore %v: guard exited %d, want the command's 9\n%s\n%s", noRestore, code, out.String(), errb.String())
		}
		got, err := os.ReadFile(filepath.Join(dir, "got"))
		if err != nil || string(got) != syscall.SIGTERM.String() {
			t.Fatalf("the command got %q (%v), want SIGTERM passed on", got, err)
		}
		want := map[bool]string{false: "v1", true: "v2"}[noRestore]
		if v := g.o1(t); v != want {
			t.Fatalf("no-restore %v: o1 = %q, want %q\n%s", noRestore, v, want, out.String())
		}
		if noRestore {
			mustContain(t, "guard's output", out.String(), "not restored, as asked", "restore-kept shop orders --form 1 --before v2")
		}
	}
}

// Usage errors and a command that cannot be run exit 2, before any point is
// taken.
func TestGuardRefusesBeforeTakingAPoint(t *testing.T) {
	b := newBed(t)
	for _, c := range []struct {
		args []string
		say  string
	}{
		{[]string{"guard", "shop", "orders", "--form", "1", "--before", "v2", "true"}, "then -- and the command to run"},
		{[]string{"guard", "shop", "--form", "1", "--before", "v2", "--", "true"}, "then -- and the command to run"},
		{[]string{"guard", "shop", "orders", "--before", "v2", "--", "true"}, `"form" not set`},
		{[]string{"guard", "shop", "orders", "--server", b.url, "--form", "1", "--before", "v2", "--", "no-such-command-here"},
			"cannot be run"},
		{[]string{"guard", "shop", "orders", "--server", b.url, "--form", "1", "--before", "v2", "--method", "sideways", "--", "true"},
			`method "sideways" is none of auto, full, delta and logical`},
	} {
		code, _, errText := runArgs(t, c.args...)
		if code != exitUsage || !strings.Contains(errText, c.say) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errText, exitUsage, c.say)
		}
	}
	rep, err := verbs.NewClient(b.nc).ListKept(context.Background(), kept.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 0 {
		t.Fatalf("a refused guard took points: %+v", rep.Points)
	}
}
