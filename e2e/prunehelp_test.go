package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/kept"
)

// runCLI runs the nats-keeper binary with args and returns its exit code,
// stdout and stderr.
func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, keeperBin, args...)
	cmd.Env = cleanEnv(home)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("nats-keeper %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	return 0, "", ""
}

// mustCLI runs the nats-keeper binary with args against the server at url,
// fails the test unless it exits 0, and returns its reply (when args hold
// --json) and its stdout.
func mustCLI(t *testing.T, home, url string, args ...string) (*kept.Reply, string) {
	t.Helper()
	code, out, errText := runCLI(t, home, append(args, "--server", url)...)
	var rep kept.Reply
	if code != 0 || (slices.Contains(args, "--json") && json.Unmarshal([]byte(out), &rep) != nil) {
		t.Fatalf("nats-keeper %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errText)
	}
	return &rep, out
}

// keptOnProcs runs a nats-server process with the sample kept data
// module/local on it and a `nats-keeper serve` on the directory
// <tmp>/keeper with extra environment entries, and waits until it answers.
func keptOnProcs(t *testing.T, tmp, module, local string, keeperEnv ...string) (*natsServer, *nats.Conn, jetstream.JetStream, *keeperProc) {
	t.Helper()
	srv, nc, js := sampleOnProc(t, tmp, module, local)
	k := startKeeper(t, srv.url(), filepath.Join(tmp, "keeper"), tmp, keeperEnv...)
	waitKeepers(t, nc, 1, k)
	return srv, nc, js, k
}

// sampleOnProc runs a nats-server process (its store in <tmp>/store) with
// the sample kept data module/local on it, and connects to it.
func sampleOnProc(t *testing.T, tmp, module, local string) (*natsServer, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	nc := connect(t, srv.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(context.Background(), js, module, local); err != nil {
		t.Fatal(err)
	}
	return srv, nc, js
}

// pointsUnder are the fingerprints of the form 1 points of module/local
// under the keeper's dir that have their record, sorted.
func pointsUnder(t *testing.T, dir, module, local string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "points", module, local))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if _, err := os.Stat(filepath.Join(dir, "points", module, local, e.Name(), "point.json")); err == nil {
			out = append(out, strings.TrimPrefix(e.Name(), "f1-"))
		}
	}
	slices.Sort(out)
	return out
}

// removals are the fingerprints a prune reply removes (or would), sorted.
func removals(rep *kept.Reply) []string {
	var out []string
	for _, d := range rep.Pruned {
		if !d.Keep {
			out = append(out, d.Point.Fingerprint)
		}
	}
	slices.Sort(out)
	return out
}

// checkPruned checks that the points removed are gone whole (no file left
// in their directories, no index record) and that list-kept lists exactly
// the points kept, each with its files.
func checkPruned(t *testing.T, dir string, nc *nats.Conn, js jetstream.JetStream, module, local string, kept, removed []string) {
	t.Helper()
	index := bucketEntries(t, js, "kept")
	for _, fp := range removed {
		pdir := filepath.Join(dir, "points", module, local, "f1-"+fp)
		_ = filepath.WalkDir(pdir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("the pruned point %s left the file %s", fp, path)
			}
			return nil
		})
		if key := "point." + module + "." + local + ".1." + fp; index[key] != "" {
			t.Errorf("the pruned point %s is still in the index as %s", fp, key)
		}
	}
	for _, fp := range kept {
		for _, f := range []string{"point.json", "bus.tar"} {
			if _, err := os.Stat(filepath.Join(dir, "points", module, local, "f1-"+fp, f)); err != nil {
				t.Errorf("the kept point %s: %v", fp, err)
			}
		}
	}
	if got := pointFingerprints(mustCall(t, nc, "list-kept", map[string]any{"module": module, "local": local})); !slices.Equal(got, kept) {
		t.Errorf("list-kept lists the points %v; want %v", got, kept)
	}
}

// checkActs checks that KEEPER_ACTS holds, for each point removed, the act
// of its removal (intent) and, after it, that it was removed (done), with
// why when why is not empty.
func checkActs(t *testing.T, js jetstream.JetStream, module, local string, removed []string, why string) {
	t.Helper()
	acts := allActs(t, js, kept.VerbPrune)
	for _, fp := range removed {
		name := module + "/" + local + " f1-" + fp + " "
		intent := slices.IndexFunc(acts, func(a kept.Act) bool {
			return a.Outcome == "intent" && strings.HasPrefix(a.What, "remove restore point "+name)
		})
		done := slices.IndexFunc(acts, func(a kept.Act) bool {
			return a.Outcome == "done" && strings.HasPrefix(a.What, "removed restore point "+name)
		})
		switch {
		case intent < 0 || done < 0:
			t.Errorf("KEEPER_ACTS lacks the intent (%d) or the done (%d) act of removing %s", intent, done, name)
		case done < intent:
			t.Errorf("the removal of %s was recorded done before its intent", name)
		case why != "" && acts[intent].Why != why:
			t.Errorf("the act of removing %s says why %q; want %q", name, acts[intent].Why, why)
		}
	}
}

// allActs are every act recorded for verb, oldest first.
func allActs(t *testing.T, js jetstream.JetStream, verb string) []kept.Act {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, "KEEPER_ACTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"mesh-broker.acts." + verb}})
	if err != nil {
		t.Fatalf("read the acts of %s: %v", verb, err)
	}
	var out []kept.Act
	for {
		m, err := c.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err != nil {
			return out // nothing more within the wait
		}
		var a kept.Act
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			t.Fatalf("act %q: %v", m.Data(), err)
		}
		out = append(out, a)
		if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
			return out
		}
	}
}

// waitLog waits until the keeper's log holds text.
func waitLog(t *testing.T, k *keeperProc, text string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(k.p.log.String(), text) {
		if k.p.done() || time.Now().After(deadline) {
			t.Fatalf("the keeper's log never said %q (exited: %v)\n%s", text, k.p.done(), tail(k.p.log.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pointRecords says how the point records of index b differ from a's.
func pointRecords(a, b map[string]string) string {
	only := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if strings.HasPrefix(k, "point.") {
				out[k] = v
			}
		}
		return out
	}
	return mapDiff(only(a), only(b))
}
