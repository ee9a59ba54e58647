package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// The keeper that captures a kept data is killed (SIGKILL) while a writer
// publishes to it; the other keeper takes the capture up when the dead
// one's lease lapses, from its last committed segment. A restore to a
// moment after the writer stopped holds every message the writer
// published, once, in order: no gap where no keeper captured, no message
// captured twice.
func TestCaptureTakenUpAfterKill(t *testing.T) {
	const module, local = "cap", "kill"
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "keeper")
	srv, nc, js := sampleOnProc(t, tmp, module, local)
	ctx := context.Background()
	a := startKeeper(t, srv.url(), dir, tmp)
	b := startKeeper(t, srv.url(), dir, tmp)
	waitKeepers(t, nc, 2, a, b)
	mustCall(t, nc, "capture-kept", map[string]any{"module": module, "local": local, "capture": "on", "caller": "e2e", "why": "capture under a kill"})

	var sent atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := js.Publish(ctx, module+"."+local+".orders.w", []byte("w-"+strconv.Itoa(i))); err != nil {
				done <- err
				return
			}
			sent.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	kv, err := js.KeyValue(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	holder := func() string {
		e, err := kv.Get(ctx, "lease-capture."+module+"."+local)
		if err != nil {
			return ""
		}
		var l struct {
			Holder string `json:"holder"`
		}
		_ = json.Unmarshal(e.Value(), &l)
		return l.Holder
	}
	var first string
	if !waitFor(30*time.Second, func() bool { first = holder(); return first != "" }) {
		t.Fatalf("no keeper took the capture up\nkeeper a:\n%s\nkeeper b:\n%s", tail(a.p.log.String()), tail(b.p.log.String()))
	}
	capturing, other := a, b
	if strings.Contains(first, ":"+strconv.Itoa(b.p.cmd.Process.Pid)+":") {
		capturing, other = b, a
	}
	reaches := func(at time.Time) bool { return captureReaches(ctx, nc, module, local, at) }
	if !waitFor(30*time.Second, func() bool { return reaches(time.Now().Add(-time.Second)) }) {
		t.Fatalf("the capture does not follow the writer\nthe capturing keeper:\n%s", tail(capturing.p.log.String()))
	}
	time.Sleep(2 * time.Second)
	capturing.p.stop(t, syscall.SIGKILL, 10*time.Second)
	killed := time.Now()
	var second string
	if !waitFor(90*time.Second, func() bool { second = holder(); return second != "" && second != first }) {
		t.Fatalf("the other keeper did not take the capture up\n%s", tail(other.p.log.String()))
	}
	if !waitFor(30*time.Second, func() bool { return reaches(time.Now().Add(-time.Second)) }) {
		t.Fatalf("the capture taken up does not follow the writer\n%s", tail(other.p.log.String()))
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the writer: %v", err)
	}
	stopped := time.Now()
	moment := stopped.Add(500 * time.Millisecond)
	if !waitFor(30*time.Second, func() bool { return reaches(moment.Add(time.Second)) }) {
		t.Fatalf("the capture did not reach the moment\n%s", tail(other.p.log.String()))
	}
	r := call(ctx, nc, "restore-kept", fmt.Appendf(nil, `{"module":%q,"local":%q,"at":%q,"caller":"e2e","why":"back to after the kill"}`,
		module, local, moment.UTC().Format(time.RFC3339Nano)), 2*time.Minute)
	if r.Err != nil || r.Code != 200 {
		t.Fatalf("restore to a moment after the kill: %v\n%s", r, tail(other.p.log.String()))
	}
	d, err := sample.Dump(ctx, js, sample.NamesOf(module, local).Stream)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for _, m := range d.Streams[0].Messages {
		text, ok := strings.CutPrefix(m.Text, "w-")
		if !ok {
			continue
		}
		if text != strconv.Itoa(next) {
			t.Fatalf("message %d of the writer is missing or twice: the restored stream holds w-%s next (seq %d)", next, text, m.Seq)
		}
		next++
	}
	if int64(next) != sent.Load() {
		t.Fatalf("the restored stream holds %d of the writer's %d messages", next, sent.Load())
	}
	t.Logf("%d messages written; the capturing keeper was killed %s before the writer stopped; %s took the capture up",
		next, stopped.Sub(killed).Round(time.Millisecond), second)
}

// captureReaches reports whether list-kept says the captured window of
// module/local reaches at.
func captureReaches(ctx context.Context, nc *nats.Conn, module, local string, at time.Time) bool {
	r := call(ctx, nc, "list-kept", fmt.Appendf(nil, `{"module":%q,"local":%q}`, module, local), 20*time.Second)
	caps, _ := r.Body["captures"].([]any)
	if r.Err != nil || r.Code != 200 || len(caps) != 1 {
		return false
	}
	c, _ := caps[0].(map[string]any)
	to, _ := c["to"].(string)
	t, err := time.Parse(time.RFC3339Nano, to)
	return err == nil && !t.Before(at)
}

// TestIncrementalPointExport: with capture on, snapshot-kept takes an
// incremental point; nats-keeper export writes it out before any keeper
// made the point of its moment, composing its archive from the base and
// segments in the store, and writes nothing to the store; nats backup
// restore stream of that export into an empty server gives back the kept
// data as it was at the point. verify-kept of it writes nothing either;
// once a dry run of its restore made the moment's point, export copies
// that point, and the two exports hold the same messages.
func TestIncrementalPointExport(t *testing.T) {
	const module, local = "incout", "ledger"
	tmp := t.TempDir()
	_, nc, js, _ := keptOnProcs(t, tmp, module, local)
	ctx := context.Background()
	names := sample.NamesOf(module, local)
	mustCall(t, nc, "capture-kept", map[string]any{"module": module, "local": local, "capture": "on", "caller": "e2e", "why": "incremental points"})
	began := time.Now()
	if !waitFor(30*time.Second, func() bool { return captureReaches(ctx, nc, module, local, began) }) {
		t.Fatal("the capture does not begin")
	}
	publish := func(n int, what string) {
		for i := range n {
			if _, err := js.Publish(ctx, module+"."+local+".orders."+what, []byte(fmt.Sprintf("%s %d", what, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(20, "before")
	time.Sleep(2500 * time.Millisecond) // a segment and a positions sample after them
	was, err := sample.Dump(ctx, js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	rep := mustCall(t, nc, "snapshot-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "inc", "caller": "e2e"})
	if p, _ := rep.Body["point"].(map[string]any); p["incremental"] != true || p["base"] == nil {
		t.Fatalf("snapshot-kept with capture on: %s", rep.Said)
	}
	publish(20, "after")
	keeperDir := filepath.Join(tmp, "keeper")
	to := filepath.Join(tmp, "exported")
	code, stdout, stderr := runCLI(t, tmp, "export", module, local, "--form", "1", "--before", "inc", "--dir", keeperDir, "--to", to)
	if code != 0 || !strings.Contains(stdout, "its archive was composed as it was written out, made from the base") {
		t.Fatalf("export of an incremental point whose moment is not made: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("%s", stdout)
	if moments, _ := filepath.Glob(filepath.Join(keeperDir, "points", module, local, "f*-at-*")); len(moments) != 0 {
		t.Fatalf("the export wrote the point of the moment into the store: %v", moments)
	}
	// verify-kept checks it and writes nothing; a dry run of its restore
	// makes the point of its moment.
	mustCall(t, nc, "verify-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "inc", "caller": "e2e"})
	if moments, _ := filepath.Glob(filepath.Join(keeperDir, "points", module, local, "f*-at-*")); len(moments) != 0 {
		t.Fatalf("verify-kept wrote the point of the moment into the store: %v", moments)
	}
	mustCall(t, nc, "restore-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "inc", "dry-run": true, "caller": "e2e", "why": "make the point of its moment"})
	made := filepath.Join(tmp, "exported-made")
	code, stdout, stderr = runCLI(t, tmp, "export", module, local, "--form", "1", "--before", "inc", "--dir", keeperDir, "--to", made)
	if code != 0 || strings.Contains(stdout, "composed") {
		t.Fatalf("export of an incremental point whose moment's point is made: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, s := range names.Streams() {
		a, errA := os.ReadFile(filepath.Join(to, s, "backup.json"))
		b, errB := os.ReadFile(filepath.Join(made, s, "backup.json"))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s/backup.json composed (%v) and copied from the moment's point (%v) differ:\n%s\n%s", s, errA, errB, a, b)
		}
		// The archives' entries carry the time they were written: what
		// they hold is compared.
		if ca, cb := arcContent(t, filepath.Join(to, s)), arcContent(t, filepath.Join(made, s)); ca != cb {
			t.Fatalf("%s/stream.arc.s2 composed and copied from the moment's point hold different messages or consumers:\n%s\n%s", s, ca, cb)
		}
	}
	fresh := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "fresh"))
	for _, s := range names.Streams() {
		natsCmd(t, tmp, fresh.url(), "backup", "restore", "stream", filepath.Join(to, s), "--no-progress")
	}
	fjs, err := jetstream.New(connect(t, fresh.url()))
	if err != nil {
		t.Fatal(err)
	}
	now, err := sample.Dump(ctx, fjs, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(was, now); d != "" {
		t.Fatalf("the exported incremental point restored by nats backup restore stream differs from the kept data at the point:\n%s", d)
	}
}

// arcContent is what the stream.arc.s2 in dir holds, as text: its head's
// sequences and counts, its consumers' entries and its messages.
func arcContent(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "stream.arc.s2"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	head, err := busarchive.ReadStreamArchive(f, func(name string, entry []byte) error {
		fmt.Fprintf(&b, "consumer %s %s\n", name, entry)
		return nil
	}, func(m busarchive.ArchivedMessage) error {
		fmt.Fprintf(&b, "%d %d %s %q %q\n", m.Seq, m.Time, m.Subject, m.Header, m.Data)
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	return fmt.Sprintf("first %d last %d msgs %d bytes %d consumers %d\n", head.FirstSeq, head.LastSeq, head.Msgs, head.Bytes, head.Consumers) + b.String()
}
