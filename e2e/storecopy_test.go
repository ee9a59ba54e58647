package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// TestCopyDirToS3AndBack moves a keeper directory (two points and an aside)
// into S3 with nats-keeper copy, and from S3 into a fresh directory: a
// second run of each copy skips everything, the directory's archives come
// back byte for byte, and every point verifies and the aside is listed on a
// keeper serving each target (on S3, the keeper that took the directory's
// index over, as S3 holds all its records; the directory's keeper is then
// refused).
func TestCopyDirToS3AndBack(t *testing.T) {
	const module, local = "moved", "ledger"
	tmp := t.TempDir()
	bus := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "bus"))
	nc := connect(t, bus.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sample.Create(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	dirD, dirE := filepath.Join(tmp, "d"), filepath.Join(tmp, "e")
	k := startKeeper(t, bus.url(), dirD, tmp)
	waitKeepers(t, nc, 1, k)
	req := func(fp string) map[string]any {
		return map[string]any{"module": module, "local": local, "form": 1, "fingerprint": fp, "caller": "e2e"}
	}
	mustCall(t, nc, "snapshot-kept", req("one"))
	if err := sample.Change(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	mustCall(t, nc, "snapshot-kept", req("two"))
	r := req("one")
	r["why"] = "e2e: an aside to copy"
	aside, _ := mustCall(t, nc, "restore-kept", r).Body["aside"].(map[string]any)
	asideID, _ := aside["id"].(string)
	k.p.stop(t, syscall.SIGTERM, time.Minute)

	s := startS3(t, "keeper-points")
	s3url := "s3://keeper-points/moved"
	copyArgs := func(from, to string) []string {
		return []string{"copy", "--from-store", from, "--to-store", to, "--s3-endpoint", s.endpoint, "--s3-path-style"}
	}
	for _, c := range []struct{ from, to string }{{"file://" + dirD, s3url}, {s3url, "file://" + dirE}} {
		start := time.Now()
		mustRun(t, tmp, s.env(), copyArgs(c.from, c.to), "done: 3 copied, 0 skipped, 0 failed, of 3 point(s) and aside(s)")
		t.Logf("copy from %s to %s took %s", c.from, c.to, time.Since(start).Round(time.Millisecond))
		mustRun(t, tmp, s.env(), copyArgs(c.from, c.to), "done: 0 copied, 3 skipped, 0 failed, of 3 point(s) and aside(s)")
	}
	for _, rel := range []string{"points/moved/ledger/f1-one", "points/moved/ledger/f1-two", "aside/" + asideID} {
		a, err := os.ReadFile(filepath.Join(dirD, rel, "bus.tar"))
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dirE, rel, "bus.tar")); err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s/bus.tar came back from S3 other than it was (%v)", rel, err)
		}
	}

	// The move: a keeper on S3 takes the index over, since S3 holds every
	// record it names; a keeper on the directory is then refused. The copy
	// in E gets a keeper with an index and verbs of its own.
	onS3 := startKeeperArgs(t, bus.url(), filepath.Join(tmp, "s3keeper"), tmp, s.args(s3url), s.env()...)
	onE := startKeeperArgs(t, bus.url(), dirE, tmp, []string{"--bucket", "kept-e", "--prefix", "on-e"})
	waitKeepers(t, nc, 2, onS3, onE)
	if got := bucketEntries(t, js, "kept")["store"]; !strings.Contains(got, s3url) {
		t.Errorf("the index's store record is %s; want the S3 store %s", got, s3url)
	}
	if code, _, stderr := runKeeper(t, tmp, nil, []string{"serve", "--server", bus.url(), "--dir", dirD}, 2*time.Minute); code != 4 || !strings.Contains(stderr, "belongs to "+s3url) {
		t.Errorf("a keeper on the old directory after the move: exit %d; want 4, naming the S3 store\n%s", code, tail(stderr))
	}
	for _, prefix := range []string{"", "on-e"} {
		for _, fp := range []string{"one", "two"} {
			mustVerify(t, nc, prefix, req(fp))
		}
		l := callJSON(t, nc, prefix, "list-kept", map[string]any{"module": module})
		if got := pointFingerprints(l); l.Code != 200 || !slices.Equal(got, []string{"one", "two"}) {
			t.Errorf("list-kept on %s: %s, points %v; want one and two", prefix, l, got)
		}
		if as, _ := l.Body["asides"].([]any); len(as) != 1 || !strings.Contains(fmt.Sprint(as[0]), asideID) {
			t.Errorf("list-kept on %s lists the asides %v; want %s", prefix, as, asideID)
		}
	}
}

// TestServeStoreRefused: serve with a store it cannot open (an unknown
// scheme, S3 with credentials the server refuses, a nats:// store where
// nothing listens) exits 5 at start with a sentence naming the store.
func TestServeStoreRefused(t *testing.T) {
	tmp := t.TempDir()
	bus := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "bus"))
	s := startS3(t, "keeper-points")
	closed := fmt.Sprintf("nats://127.0.0.1:%d/b", freePort(t))
	bad := []string{"AWS_ACCESS_KEY_ID=" + s.access, "AWS_SECRET_ACCESS_KEY=not-the-secret", "AWS_REGION=us-east-1"}
	for _, c := range []struct {
		store string
		args  []string
		env   []string
	}{
		{"ftp://x", []string{"--store", "ftp://x"}, nil},
		{"s3://keeper-points/p", s.args("s3://keeper-points/p"), bad},
		{closed, []string{"--store", closed}, nil},
	} {
		args := append([]string{"serve", "--server", bus.url(), "--dir", filepath.Join(tmp, "keeper")}, c.args...)
		code, _, stderr := runKeeper(t, tmp, c.env, args, 2*time.Minute)
		if code != 5 || !strings.Contains(stderr, "the store "+c.store+" could not be opened") || !strings.Contains(stderr, "so nothing is served") {
			t.Errorf("serve --store %s: exit %d; want 5 with a sentence naming the store\n%s", c.store, code, tail(stderr))
		}
		t.Logf("serve --store %s: %s", c.store, strings.TrimSpace(tail(stderr)))
	}
}

// mustRun runs nats-keeper with args and wants exit 0 and want in its
// output.
func mustRun(t *testing.T, home string, env, args []string, want string) {
	t.Helper()
	code, stdout, stderr := runKeeper(t, home, env, args, 5*time.Minute)
	if code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("nats-keeper %s: exit %d, want 0 and %q\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, tail(stdout), tail(stderr))
	}
}

// runKeeper runs nats-keeper to its end (killed after limit) and returns its
// exit code and output.
func runKeeper(t *testing.T, home string, env, args []string, limit time.Duration) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, keeperBin, args...)
	cmd.Env = cleanEnv(home, env...)
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("nats-keeper %s did not end within %s\n%s", strings.Join(args, " "), limit, tail(stderr.String()))
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("nats-keeper %s: %v", strings.Join(args, " "), err)
	}
	return 0, stdout.String(), stderr.String()
}
