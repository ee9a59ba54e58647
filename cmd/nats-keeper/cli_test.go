package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"snapshot-kept", "billing"},                                          // too few arguments
		{"snapshot-kept", "billing", "ledger", "--before", "x"},               // --form missing
		{"restore-kept", "billing", "ledger", "--form", "3", "--before", "x"}, // --why missing
		{"list", "--no-such-flag"},
		{"list", "a", "b", "c"},
		{"no-such-command"},
		{"discard-aside", "billing.ledger.20260101T000000"}, // --why missing
		{"snapshot-kept", "billing", "ledger", "--form", "three", "--before", "x"},
	} {
		code, _, errText := runArgs(t, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %s", args, code, exitUsage, errText)
		}
		if !strings.Contains(errText, "nats-keeper: ") {
			t.Errorf("%v: no sentence on stderr: %q", args, errText)
		}
	}
}

func TestHelpDocumentsExitCodes(t *testing.T) {
	code, out, _ := runArgs(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Exit codes:", "2  bad usage or bad request", "5  no service or bus reachable", "demo", "serve", "snapshot-kept"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

func TestVersion(t *testing.T) {
	var o outs
	if err := runVersion(context.Background(), versionOptions{Out: &o.out}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(o.out.String(), "nats-keeper ") || !strings.Contains(o.out.String(), "nats-server") {
		t.Fatalf("version printed %q", o.out.String())
	}
}

// The client commands against a real keeper: snapshot, list, verify, restore
// (dry-run, then for real), discard; their human and JSON output.
func TestClientCommands(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	f := b.flags()

	progress := make(chan kept.Progress, 100)
	stop, err := verbs.NewClient(b.nc).WatchProgress("billing", "ledger", func(p kept.Progress) { progress <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	var o outs
	err = runSnapshot(ctx, snapshotOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Form: 3, Before: "9f2c1a7e", CatchUp: "ledger-migrate-3-to-4"})
	if err != nil {
		t.Fatalf("snapshot-kept: %v", err)
	}
	mustContain(t, "snapshot-kept", o.out.String(), "billing", "KV_billing_ledger", "form 3 before 9f2c1a7e")
	select {
	case p := <-progress:
		if p.Verb != kept.VerbSnapshot || p.Module != "billing" || p.Local != "ledger" {
			t.Errorf("progress %+v", p)
		}
	case <-time.After(time.Minute): // a guard against hanging, not a measurement
		t.Fatal("snapshot-kept published no progress")
	}

	o = outs{}
	if err := runList(ctx, listOptions{Client: f, Out: o.output(), Module: "billing"}); err != nil {
		t.Fatalf("list: %v", err)
	}
	mustContain(t, "list", o.out.String(), "Restore points:", "9f2c1a7e", "ledger-migrate-3-to-4")

	o = outs{}
	if err := runVerify(ctx, verifyOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Form: 3, Before: "9f2c1a7e"}); err != nil {
		t.Fatalf("verify: %v", err)
	}
	mustContain(t, "verify", o.out.String(), "verifies")

	if err := sample.Change(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	ro := restoreOptions{Client: f, Module: "billing", Local: "ledger", Form: 3, FormSet: true, Before: "9f2c1a7e", Why: "test"}

	o = outs{}
	ro.Out, ro.DryRun = o.output(), true
	if err := runRestore(ctx, ro); err != nil {
		t.Fatalf("restore-kept --dry-run: %v", err)
	}
	mustContain(t, "dry-run", o.out.String(), "plan (nothing was changed)", "set aside:", "OBJ_billing_ledger")

	o = outs{}
	ro.Out, ro.DryRun = o.output(), false
	ro.Client.JSON = true
	if err := runRestore(ctx, ro); err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	var rep kept.Reply
	if err := json.Unmarshal(o.out.Bytes(), &rep); err != nil {
		t.Fatalf("restore --json printed %q: %v", o.out.String(), err)
	}
	if rep.Said == "" || rep.Aside == nil || rep.Aside.ID == "" || rep.CatchUp != "ledger-migrate-3-to-4" {
		t.Fatalf("restore reply %+v", rep)
	}

	o = outs{}
	if err := runList(ctx, listOptions{Client: f, Out: o.output()}); err != nil {
		t.Fatalf("list: %v", err)
	}
	mustContain(t, "list after restore", o.out.String(), "Set-aside data", rep.Aside.ID)

	o = outs{}
	if err := runDiscard(ctx, discardOptions{Client: f, Out: o.output(), ID: rep.Aside.ID, Why: "checked"}); err != nil {
		t.Fatalf("discard-aside: %v", err)
	}
	mustContain(t, "discard", o.out.String(), rep.Aside.ID)

	// Through the whole command line too: exit 0.
	code, out, errText := runArgs(t, "list", "billing", "ledger", "--server", b.url)
	if code != 0 || strings.Contains(out, rep.Aside.ID) {
		t.Fatalf("list after discard: exit %d, out %s, err %s", code, out, errText)
	}
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, got)
		}
	}
}

func TestClientFailures(t *testing.T) {
	b := newBed(t)
	ctx := context.Background()
	f := b.flags()

	// Bad request: refused before anything is sent, exit 2.
	var o outs
	err := runSnapshot(ctx, snapshotOptions{Client: f, Out: o.output(), Module: "bill.ing", Local: "ledger", Before: "x"})
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "nothing was done") {
		t.Fatalf("bad name: %v", err)
	}
	err = runRestore(ctx, restoreOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Why: "w"})
	if exitCode(err) != exitUsage {
		t.Fatalf("restore without --form/--before: %v", err)
	}

	// The service refuses a bad request too: exit 2 from a 400.
	bad := f
	bad.Caller = strings.Repeat("c", 5000)
	err = runList(ctx, listOptions{Client: bad, Out: o.output()})
	if exitCode(err) != exitUsage {
		t.Fatalf("oversize caller: %v", err)
	}

	// Not found: exit 3.
	err = runVerify(ctx, verifyOptions{Client: f, Out: o.output(), Module: "billing", Local: "nothing", Form: 1, Before: "x"})
	if exitCode(err) != exitNotFound {
		t.Fatalf("verify of a missing point: exit %d, %v", exitCode(err), err)
	}
	err = runSnapshot(ctx, snapshotOptions{Client: f, Out: o.output(), Module: "billing", Local: "nothing", Form: 1, Before: "x"})
	if exitCode(err) != exitNotFound {
		t.Fatalf("snapshot of missing kept data: exit %d, %v", exitCode(err), err)
	}
	o = outs{}
	jf := f
	jf.JSON = true
	err = runDiscard(ctx, discardOptions{Client: jf, Out: o.output(), ID: "billing.ledger.20260101T000000", Why: "w"})
	if exitCode(err) != exitNotFound {
		t.Fatalf("discard of a missing aside: exit %d, %v", exitCode(err), err)
	}
	var eb verbs.ErrorBody
	if json.Unmarshal(o.out.Bytes(), &eb) != nil || eb.Code != 404 || eb.Error == "" {
		t.Fatalf("--json failure printed %q", o.out.String())
	}

	// No service on the prefix: exit 5.
	np := f
	np.Prefix = "nobody-here"
	err = runList(ctx, listOptions{Client: np, Out: o.output()})
	if exitCode(err) != exitNoService {
		t.Fatalf("no service: exit %d, %v", exitCode(err), err)
	}

	// No bus at all: exit 5.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + l.Addr().String()
	l.Close()
	code, _, errText := runArgs(t, "list", "--server", dead)
	if code != exitNoService || !strings.Contains(errText, "could not connect") {
		t.Fatalf("no bus: exit %d, %s", code, errText)
	}
}

// blockingBus holds the first Snapshot until release is closed.
type blockingBus struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

// wrap puts b in front of c's bus.
func (b *blockingBus) wrap(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnSnapshot(func(ctx context.Context, stream string, data, meta io.WriteCloser, next fault.SnapshotFunc) error {
		b.once.Do(func() {
			close(b.entered)
			<-b.release
		})
		return next(ctx, stream, data, meta)
	})
}

// A second verb on kept data that a verb in flight holds: exit 4, naming the
// holder; the first verb then finishes.
func TestClientBusy(t *testing.T) {
	bb := &blockingBus{entered: make(chan struct{}), release: make(chan struct{})}
	b := newBedWith(t, bb.wrap)
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	f := b.flags()
	first := make(chan error, 1)
	go func() {
		var o outs
		first <- runSnapshot(ctx, snapshotOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Form: 1, Before: "a"})
	}()
	<-bb.entered
	var o outs
	err := runSnapshot(ctx, snapshotOptions{Client: f, Out: o.output(), Module: "billing", Local: "ledger", Form: 1, Before: "b"})
	close(bb.release)
	if exitCode(err) != exitBusy {
		t.Fatalf("second verb: exit %d, %v", exitCode(err), err)
	}
	if !strings.Contains(err.Error(), "snapshot-kept") {
		t.Errorf("the busy sentence does not name the holder: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first verb: %v", err)
	}
}

func TestServeNeedsAServer(t *testing.T) {
	var o outs
	err := runServe(context.Background(), serveOptions{Dir: t.TempDir(), Prefix: verbs.DefaultPrefix, Bucket: "kept",
		LogFormat: "text", LogLevel: "info", Err: &o.err})
	if exitCode(err) != exitNoService || !strings.Contains(err.Error(), "--embedded") {
		t.Fatalf("serve without a server: exit %d, %v", exitCode(err), err)
	}
	err = runServe(context.Background(), serveOptions{Dir: t.TempDir(), Prefix: verbs.DefaultPrefix, Bucket: "kept",
		LogFormat: "yaml", LogLevel: "info", Err: &o.err, Embedded: true})
	if exitCode(err) != exitUsage {
		t.Fatalf("serve --log-format yaml: exit %d, %v", exitCode(err), err)
	}
	err = runServe(context.Background(), serveOptions{Dir: t.TempDir(), Prefix: "a b", Bucket: "kept",
		LogFormat: "text", LogLevel: "info", Err: &o.err, Embedded: true})
	if exitCode(err) != exitUsage {
		t.Fatalf("serve --prefix 'a b': exit %d, %v", exitCode(err), err)
	}
	err = runServe(context.Background(), serveOptions{Dir: t.TempDir(), Prefix: verbs.DefaultPrefix, Bucket: "kept",
		LogFormat: "text", LogLevel: "info", Err: &o.err, Embedded: true, StreamParallel: 65})
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--stream-parallel 65 is not between 1 and 64") {
		t.Fatalf("serve --stream-parallel 65: exit %d, %v", exitCode(err), err)
	}
}

// serve --embedded answers the client commands, and stops cleanly when its
// context ends (as on SIGTERM).
func TestServeEmbedded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncbuf.Buffer // nats callbacks may still log after serve returns
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveOptions{Dir: filepath.Join(t.TempDir(), "keeper"), Prefix: "ops.keeper", Bucket: "kept", Embedded: true,
			Listen: "127.0.0.1:0", LogFormat: "json", LogLevel: "info", Err: &logs,
			ready: func(_ *verbs.Service, url string) { ready <- url }})
	}()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		t.Fatalf("serve ended early: %v", err)
	}
	var o outs
	f := clientFlags{Conn: connFlags{Server: url}, Prefix: "ops.keeper", Timeout: verbs.DefaultTimeout, Caller: "t"}
	if err := runList(ctx, listOptions{Client: f, Out: o.output()}); err != nil {
		t.Fatalf("list against serve --embedded: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"serving"`) {
		t.Errorf("json logs lack the serving line:\n%s", logs.String())
	}
	// The port is taken: a clear conflict, exit 4.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = runServe(context.Background(), serveOptions{Dir: filepath.Join(t.TempDir(), "keeper"), Prefix: "p", Bucket: "kept", Embedded: true,
		Listen: l.Addr().String(), LogFormat: "text", LogLevel: "info", Err: &logs})
	if exitCode(err) != exitBusy || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("serve on a taken port: exit %d, %v", exitCode(err), err)
	}
}

func TestDemo(t *testing.T) {
	var o outs
	if err := runDemo(context.Background(), demoOptions{Out: &o.out, Err: &o.err}); err != nil {
		t.Fatalf("demo: %v\n%s", err, o.out.String())
	}
	out := o.out.String()
	for i, want := range []string{"Starting an embedded nats-server", "Making module billing's kept data", "Taking a restore point",
		"Changing the data", "Restoring the point", "back as it was", "every message, key, revision",
		"set aside, not lost", "aside billing.ledger.", "Discarding the set-aside copy", "The demo is done."} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks step %d %q", i, want)
		}
	}
	if t.Failed() {
		fmt.Println(out)
	}
}

func TestProgressLine(t *testing.T) {
	var o outs
	p := &progressLine{w: &o.err}
	p.show(kept.Progress{Verb: "restore-kept", Step: "restore", Stream: "KV_billing_ledger", StreamsDone: 1, StreamsTotal: 3, Bytes: 3 << 20})
	p.clear()
	got := o.err.String()
	for _, want := range []string{"\r\033[K", "restore-kept restore: stream 2 of 3 KV_billing_ledger, 3.0 MiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress line %q lacks %q", got, want)
		}
	}
	if !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("the progress line is not cleared: %q", got)
	}
	var q outs
	(&progressLine{w: &q.err}).clear()
	if q.err.Len() != 0 {
		t.Errorf("clear without progress wrote %q", q.err.String())
	}
}

// The progress line's text: never "of 0" nor an empty stream name; the total,
// the percentage and the time left when the total is known.
func TestProgressText(t *testing.T) {
	for _, tc := range []struct {
		pr      kept.Progress
		elapsed time.Duration
		want    string
	}{
		{kept.Progress{Verb: "restore-kept", Step: "restore", Stream: "billing_ledger", StreamsDone: 1, StreamsTotal: 3,
			Bytes: 120 << 20, BytesTotal: 1 << 30}, 530 * time.Millisecond,
			"restore-kept restore: stream 2 of 3 billing_ledger, 120.0 MiB of 1.0 GiB (11%), 226.4 MiB/s, ETA 4s"},
		{kept.Progress{Verb: "verify-kept", Step: "verify"}, 0, "verify-kept verify: 0 B"},
		{kept.Progress{Verb: "verify-kept", Step: "verify", Stream: "KV_billing_ledger", Bytes: 2048}, 0,
			"verify-kept verify: stream KV_billing_ledger, 2.0 KiB"},
		{kept.Progress{Verb: "snapshot-kept", Step: "snapshot", StreamsDone: 2, StreamsTotal: 2, Bytes: 3 << 20}, 0,
			"snapshot-kept snapshot: stream 2 of 2, 3.0 MiB"},
		{kept.Progress{Verb: "snapshot-kept", Step: "snapshot", Stream: "s", StreamsTotal: 1, Bytes: 2 << 20, BytesTotal: 1 << 20}, time.Second,
			"snapshot-kept snapshot: stream 1 of 1 s, 2.0 MiB of 1.0 MiB (100%), 2.0 MiB/s"},
	} {
		if got := progressText(tc.pr, tc.elapsed); got != tc.want {
			t.Errorf("progressText(%+v, %v)\n got %q\nwant %q", tc.pr, tc.elapsed, got, tc.want)
		}
	}
}

// signalBuffer is a concurrency-safe buffer that says when its text first
// contains a string.
type signalBuffer struct {
	mu   sync.Mutex
	b    strings.Builder
	when string
	seen chan struct{}
}

func (s *signalBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	if s.seen != nil && strings.Contains(s.b.String(), s.when) {
		close(s.seen)
		s.seen = nil
	}
	return len(p), nil
}

func (s *signalBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The reply is printed on a line of its own, after the progress line was
// cleared, and no progress comes after it.
func TestProgressLineClearedBeforeTheReply(t *testing.T) {
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	term := &signalBuffer{when: "snapshot-kept snapshot:", seen: make(chan struct{})}
	seen := term.seen
	svc, err := verbs.Serve(context.Background(), nc, engineFunc(func(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		b, _ := json.Marshal(kept.Progress{Verb: verb, Module: r.Module, Local: r.Local, Step: "snapshot", Stream: "billing_ledger",
			StreamsTotal: 1, Bytes: 5 << 20})
		if err := nc.Publish(verbs.ProgressSubject(verbs.DefaultPrefix, r.Module, r.Local), b); err != nil {
			return nil, err
		}
		select {
		case <-seen: // the progress line is on the terminal
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &kept.Reply{Said: "Took restore point billing/ledger f1-f."}, nil
	}), verbs.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	f := clientFlags{Conn: connFlags{Server: s.ClientURL()}, Prefix: verbs.DefaultPrefix, Timeout: time.Minute, Caller: "test"}
	err = callVerb(context.Background(), f, output{Out: term, Err: term, Progress: true}, kept.VerbSnapshot,
		kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "f"}, printSaid)
	if err != nil {
		t.Fatal(err)
	}
	got := term.String()
	if !strings.Contains(got, "\r\033[KTook restore point") || !strings.HasSuffix(got, "f1-f.\n") {
		t.Fatalf("the reply is not on a cleared line of its own: %q", got)
	}
}

// engineFunc answers every verb with one function.
type engineFunc func(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error)

func (f engineFunc) Handle(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error) {
	return f(ctx, verb, r)
}
