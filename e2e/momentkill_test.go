package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/sample"
)

// TestComposedMomentKeeperKilled: two served keepers whose store is the
// bus's own object store (not a local file store, so a restore to a moment
// composes the moment's archive in the spool directory of the keeper that
// runs it, instead of uploading its point); the one running a restore to
// a moment (method full) is killed (SIGKILL, by its own step hook) once it
// removed a live stream. The other keeper takes the restore up: it makes
// the point of the moment from the base and segments, durably, and
// finishes the restore from it. The caller is told the restore was cut
// short and finished; the kept data is as it was at the moment; the point
// of the moment is kept; nothing is left in the spool directory.
func TestComposedMomentKeeperKilled(t *testing.T) {
	const module, local = "mom", "kill"
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "keeper")
	srv, nc, js := sampleOnProc(t, tmp, module, local)
	ctx := context.Background()
	names := sample.NamesOf(module, local)
	crash := "NATS_KEEPER_CRASH_AT=removed:" + names.KVStream
	storeArgs := []string{"--store", srv.url() + "/keeper-points"}
	a := startKeeperArgs(t, srv.url(), dir, tmp, storeArgs, crash)
	b := startKeeperArgs(t, srv.url(), dir, tmp, storeArgs, crash)
	waitKeepers(t, nc, 2, a, b)
	mustCall(t, nc, "capture-kept", map[string]any{"module": module, "local": local, "capture": "on", "caller": "e2e", "why": "a moment to go back to"})
	began := time.Now()
	if !waitFor(30*time.Second, func() bool { return captureReaches(ctx, nc, module, local, began) }) {
		t.Fatal("the capture does not begin")
	}
	publish := func(n int, what string) {
		for i := range n {
			if _, err := js.Publish(ctx, module+"."+local+".orders."+what, fmt.Appendf(nil, "%s %d", what, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(20, "before")
	time.Sleep(1500 * time.Millisecond)
	moment := time.Now()
	was, err := sample.Dump(ctx, js, names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	publish(20, "after")
	if !waitFor(30*time.Second, func() bool { return captureReaches(ctx, nc, module, local, moment.Add(time.Second)) }) {
		t.Fatal("the capture did not reach the moment")
	}

	code, out, errText := runCLI(t, tmp, "restore-kept", module, local, "--at", moment.UTC().Format(time.RFC3339Nano),
		"--method", "full", "--why", "the migration failed", "--server", srv.url(), "--json")
	var rep struct {
		Said string `json:"said"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !strings.Contains(rep.Said, "was cut short") || !strings.Contains(rep.Said, "recovery finished it") {
		t.Fatalf("restore-kept --at whose keeper died: exit %d\n%s%s\nkeeper a:\n%s\nkeeper b:\n%s", code, out, errText, tail(a.p.log.String()), tail(b.p.log.String()))
	}
	if a.p.done() == b.p.done() {
		t.Fatalf("one keeper should have died and one served (a ended: %v, b ended: %v)", a.p.done(), b.p.done())
	}
	survivor := b
	if b.p.done() {
		survivor = a
	}
	if !strings.Contains(survivor.p.log.String(), "making the point of the moment an interrupted restore composed") {
		t.Errorf("the keeper that took the restore up did not make the moment's point:\n%s", tail(survivor.p.log.String()))
	}
	now, err := sample.Dump(ctx, js, names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := texts(now.Streams[0]), texts(was.Streams[0]); got != want {
		t.Fatalf("the stream after the restore taken up differs from the moment:\n got: %s\nwant: %s", got, want)
	}
	list := mustCall(t, nc, "list-kept", map[string]any{"module": module, "local": local})
	points, _ := list.Body["points"].([]any)
	var moments []string
	for _, p := range points {
		if fp, _ := p.(map[string]any)["fingerprint"].(string); strings.HasPrefix(fp, "at-") {
			moments = append(moments, fp)
		}
	}
	if len(moments) != 1 {
		t.Errorf("the keeper that took the restore up made %d point(s) of the moment, want 1: %v", len(moments), moments)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("the spool directory holds %s", e.Name())
	}
	t.Logf("%s", rep.Said)
}

// texts is the messages of a stream dump, one line each (sequence and
// text).
func texts(d sample.StreamDump) string {
	var b strings.Builder
	for _, m := range d.Messages {
		fmt.Fprintf(&b, "%d %s\n", m.Seq, m.Text)
	}
	return b.String()
}
