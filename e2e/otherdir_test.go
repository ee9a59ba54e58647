package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// TestSecondKeeperOtherDir starts a keeper on directory A and takes a
// point, then a second keeper on the same bus with directory B and the same
// index: it must refuse to start (exit 4, naming both directories and
// --bucket) and change nothing, so the first keeps answering for its point
// every time. A keeper on B with an index and verbs of its own (--bucket,
// --prefix) serves beside the first, each with its own records.
func TestSecondKeeperOtherDir(t *testing.T) {
	const module, local = "twodirs", "ledger"
	tmp := t.TempDir()
	dirA, dirB := filepath.Join(tmp, "keeper-a"), filepath.Join(tmp, "keeper-b")
	srv := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	nc := connect(t, srv.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sample.Create(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	a := startKeeper(t, srv.url(), dirA, tmp)
	waitKeepers(t, nc, 1, a)
	req := func(fingerprint string) map[string]any {
		return map[string]any{"module": module, "local": local, "form": 1, "fingerprint": fingerprint, "caller": "e2e"}
	}
	mustCall(t, nc, "snapshot-kept", req("one"))
	pointOne := "point." + module + "." + local + ".1.one"
	index := bucketEntries(t, js, "kept")
	if _, ok := index[pointOne]; !ok {
		t.Fatalf("the index does not hold %s after the snapshot: %v", pointOne, keysOf(index))
	}
	if d := storeDir(t, index); d != dirA {
		t.Fatalf("the index's store record names %q, not the first keeper's directory %s", d, dirA)
	}

	// A second keeper, same bus, same index and verbs, another directory.
	cmd := exec.Command(keeperBin, "serve", "--server", srv.url(), "--dir", dirB, "--log-format", "json")
	cmd.Env = cleanEnv(tmp)
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var berr error
	select {
	case berr = <-exited:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("the keeper on %s, whose directory is not the index's, did not exit within 2 minutes\nstdout:\n%s\nstderr:\n%s",
			dirB, tail(stdout.String()), tail(stderr.String()))
	}
	var ee *exec.ExitError
	if !errors.As(berr, &ee) || ee.ExitCode() != 4 {
		t.Errorf("the keeper on %s ended with %v; want exit code 4 (conflict)\nstderr:\n%s", dirB, berr, tail(stderr.String()))
	}
	for _, part := range []string{dirA, dirB, "--bucket"} {
		if !strings.Contains(stderr.String(), part) {
			t.Errorf("the refusing keeper's stderr does not name %q:\n%s", part, tail(stderr.String()))
		}
	}
	t.Logf("the keeper on %s said: %s", dirB, strings.TrimSpace(tail(stderr.String())))

	// The first keeper answers for its point every time, and its index is
	// as it was.
	listOf := func(t *testing.T, prefix string) []string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"module": module, "local": local, "caller": "e2e"})
		r := callAt(ctx, nc, prefix, "list-kept", body, time.Minute)
		if r.Err != nil || r.Code != 200 {
			t.Errorf("list-kept on %s: %s", prefix, r)
			return nil
		}
		return pointFingerprints(r)
	}
	verify := func(prefix, fingerprint string) reply {
		body, _ := json.Marshal(req(fingerprint))
		return callAt(ctx, nc, prefix, "verify-kept", body, 5*time.Minute)
	}
	answersForOne := func(t *testing.T, when string) {
		t.Helper()
		for i := range 10 {
			if got := listOf(t, verbs.DefaultPrefix); len(got) != 1 || got[0] != "one" {
				t.Errorf("%s, list-kept #%d lists the points %v; want only f1-one", when, i+1, got)
			}
			if r := verify(verbs.DefaultPrefix, "one"); r.Err != nil || r.Code != 200 {
				t.Errorf("%s, verify-kept #%d of f1-one: %s", when, i+1, r)
			}
		}
	}
	answersForOne(t, "after the second keeper was refused")
	if d := mapDiff(index, bucketEntries(t, js, "kept")); d != "" {
		t.Errorf("the refused keeper changed the index:\n%s", d)
	}
	if a.p.done() {
		t.Fatalf("the first keeper exited: %v\n%s", a.p.err, tail(a.p.log.String()))
	}

	// A keeper on B with an index and verbs of its own serves beside it.
	t.Run("a keeper on B with its own --bucket and --prefix", func(t *testing.T) {
		c := startKeeperArgs(t, srv.url(), dirB, tmp, []string{"--bucket", "kept2", "--prefix", "other"})
		waitKeepers(t, nc, 2, a, c)
		body, _ := json.Marshal(req("two"))
		if r := callAt(ctx, nc, "other", "snapshot-kept", body, 5*time.Minute); r.Err != nil || r.Code != 200 {
			t.Fatalf("snapshot-kept on the keeper with its own index: %s\n%s", r, tail(c.p.log.String()))
		}
		verifyArchive(t, filepath.Join(dirB, "points", module, local, "f1-two"))
		own := bucketEntries(t, js, "kept2")
		if _, ok := own["point."+module+"."+local+".1.two"]; !ok {
			t.Errorf("kept2 does not hold the second keeper's point: %v", keysOf(own))
		}
		if _, ok := own[pointOne]; ok {
			t.Errorf("kept2 holds the first keeper's point %s", pointOne)
		}
		if d := storeDir(t, own); d != dirB {
			t.Errorf("kept2's store record names %q, not %s", d, dirB)
		}
		if got := listOf(t, "other"); len(got) != 1 || got[0] != "two" {
			t.Errorf("list-kept on the prefix other lists the points %v; want only f1-two", got)
		}
		if r := verify("other", "two"); r.Err != nil || r.Code != 200 {
			t.Errorf("verify-kept of f1-two on the prefix other: %s", r)
		}
		if r := verify("other", "one"); r.Err != nil || r.Code != 404 {
			t.Errorf("verify-kept of the first keeper's f1-one on the prefix other: %s; want 404 (not its record)", r)
		}
		answersForOne(t, "with a keeper of its own index beside it")
		if d := mapDiff(index, bucketEntries(t, js, "kept")); d != "" {
			t.Errorf("the keeper with its own index changed the first keeper's index:\n%s", d)
		}
		for name, k := range map[string]*keeperProc{"first": a, "own-index": c} {
			if k.p.done() {
				t.Errorf("the %s keeper exited: %v\n%s", name, k.p.err, tail(k.p.log.String()))
			}
		}
	})
}

// bucketEntries is every key of a KV bucket with its value.
func bucketEntries(t *testing.T, js jetstream.JetStream, bucket string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatalf("open the bucket %s: %v", bucket, err)
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatalf("keys of %s: %v", bucket, err)
	}
	out := map[string]string{}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get %s from %s: %v", k, bucket, err)
		}
		out[k] = string(e.Value())
	}
	return out
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// storeDir is the directory of the file store the index's store record
// names.
func storeDir(t *testing.T, index map[string]string) string {
	t.Helper()
	var rec struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(index["store"]), &rec); err != nil {
		t.Fatalf("the index's store record %q: %v", index["store"], err)
	}
	return strings.TrimPrefix(rec.URL, "file://")
}

// pointFingerprints are the fingerprints of the points a list-kept reply
// lists, sorted.
func pointFingerprints(r reply) []string {
	var out []string
	points, _ := r.Body["points"].([]any)
	for _, p := range points {
		if m, ok := p.(map[string]any); ok {
			s, _ := m["fingerprint"].(string)
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
