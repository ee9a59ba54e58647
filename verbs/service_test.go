package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/kept"
)

// fakeEngine answers every verb with fn.
type fakeEngine struct {
	fn func(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error)
}

func (f *fakeEngine) Handle(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error) {
	return f.fn(ctx, verb, r)
}

func startFake(t *testing.T, fn func(context.Context, string, kept.Request) (*kept.Reply, error), opts ...ServeOption) (*nats.Conn, *Service) {
	t.Helper()
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	svc, err := Serve(context.Background(), nc, &fakeEngine{fn: fn}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	return nc, svc
}

// cannedFailure is what the fake engines answer for the kept data
// "missing" (404), "held" (409) and "broken" (500, its sentence on two
// lines), or nil.
func cannedFailure(local string) error {
	switch local {
	case "missing":
		return fmt.Errorf("%w: no stream of billing_missing, so nothing was kept", kept.ErrNotFound)
	case "held":
		return fmt.Errorf("%w: billing.held is held by restore-kept, so nothing was done", kept.ErrBusy)
	case "broken":
		return fmt.Errorf("%w: the disk is full,\nso no point was made", kept.ErrFailed)
	}
	return nil
}

var snap = kept.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "f1", Caller: "test"}

func TestServiceRepliesAndErrors(t *testing.T) {
	nc, _ := startFake(t, func(_ context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		if err := cannedFailure(r.Local); err != nil {
			return nil, err
		}
		switch r.Local {
		case "silent":
			return nil, nil
		case "panics":
			panic("boom")
		}
		return &kept.Reply{Said: verb + " of " + r.Module + "." + r.Local + " done.", Dir: "points/x"}, nil
	})
	c := NewClient(nc, WithTimeout(time.Minute))
	ctx := context.Background()

	rep, err := c.SnapshotKept(ctx, snap)
	if err != nil || rep.Said != "snapshot-kept of billing.ledger done." || rep.Dir != "points/x" {
		t.Fatalf("snapshot: %+v, %v", rep, err)
	}
	for _, tc := range []struct {
		local string
		code  int
		is    error
	}{
		{"missing", 404, kept.ErrNotFound},
		{"held", 409, kept.ErrBusy}, // errors.Is(err, kept.ErrBusy) holds on the client too
		{"broken", 500, kept.ErrFailed},
		{"silent", 500, kept.ErrFailed},
		{"panics", 500, kept.ErrFailed},
	} {
		r := snap
		r.Local = tc.local
		_, err := c.SnapshotKept(ctx, r)
		var ve *Error
		if !errors.As(err, &ve) || ve.Code != tc.code || !errors.Is(err, tc.is) {
			t.Errorf("%s: got %v (%#v), want code %d", tc.local, err, ve, tc.code)
		}
		if kept.KindOf(err) != tc.is {
			t.Errorf("%s: kind %v, want %v", tc.local, kept.KindOf(err), tc.is)
		}
		if busy := tc.is == kept.ErrBusy; ve != nil && (ve.Busy != busy || errors.Is(err, kept.ErrBusy) != busy ||
			errors.Is(err, kept.ErrConflict) != (tc.code == 409)) {
			t.Errorf("%s: busy %v, errors.Is busy %v, conflict %v; want busy %v", tc.local, ve.Busy,
				errors.Is(err, kept.ErrBusy), errors.Is(err, kept.ErrConflict), busy)
		}
	}

	// A bad request through the raw bus: headers and JSON body.
	msg, err := nc.Request(DefaultPrefix+"."+kept.VerbSnapshot, []byte(`{"module":"a","local":"b","fingerprint":"f","extra":1}`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(micro.ErrorCodeHeader) != "400" || !strings.Contains(msg.Header.Get(micro.ErrorHeader), "so nothing was done") {
		t.Fatalf("headers %v", msg.Header)
	}
	var eb ErrorBody
	if err := json.Unmarshal(msg.Data, &eb); err != nil || eb.Code != 400 || !strings.Contains(eb.Error, `"extra"`) {
		t.Fatalf("body %s: %v", msg.Data, err)
	}
	// A multi-line sentence stays one header line but whole in the body.
	r := snap
	r.Local = "broken"
	msg, err = nc.Request(DefaultPrefix+"."+kept.VerbSnapshot, mustJSON(t, r), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if h := msg.Header.Get(micro.ErrorHeader); strings.Contains(h, "\n") || !strings.Contains(h, "disk is full") {
		t.Fatalf("header %q", h)
	}
	if err := json.Unmarshal(msg.Data, &eb); err != nil || !strings.Contains(eb.Error, "full,\nso") || eb.Busy {
		t.Fatalf("body %s: %v", msg.Data, err)
	}
	// A busy kept data says so in the body, beside its 409.
	r.Local = "held"
	msg, err = nc.Request(DefaultPrefix+"."+kept.VerbSnapshot, mustJSON(t, r), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	eb = ErrorBody{}
	if err := json.Unmarshal(msg.Data, &eb); err != nil || eb.Code != 409 || !eb.Busy || msg.Header.Get(micro.ErrorCodeHeader) != "409" {
		t.Fatalf("busy body %s: %v", msg.Data, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClientNoService(t *testing.T) {
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	_, err := NewClient(nc, WithPrefix("nobody-here")).ListKept(context.Background(), kept.Request{})
	if !errors.Is(err, kept.ErrNoBus) || kept.KindOf(err) != kept.ErrNoBus || Code(err) != CodeNoBus {
		t.Fatalf("got %v", err)
	}
}

func TestServiceInfo(t *testing.T) {
	nc, svc := startFake(t, nil, WithPrefix("ops.keeper"), WithVersion("v1.2.3"))
	info := svc.Info()
	if info.Name != ServiceName || info.Version != "1.2.3" || len(info.Endpoints) != len(Verbs()) {
		t.Fatalf("info %+v", info)
	}
	for i, ep := range info.Endpoints {
		if ep.Subject != "ops.keeper."+Verbs()[i] || ep.QueueGroup != QueueGroup {
			t.Errorf("endpoint %+v", ep)
		}
	}
	// The standard discovery subject sees it, as `nats micro ls` does.
	msg, err := nc.Request("$SRV.PING."+ServiceName, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(msg.Data, &ping); err != nil || ping.Name != ServiceName {
		t.Fatalf("ping %s: %v", msg.Data, err)
	}
}

// Verbs on different kept data run at the same time: the first waits until
// the second has started, which only works if each runs in its own goroutine.
func TestServiceRunsVerbsConcurrently(t *testing.T) {
	second := make(chan struct{})
	nc, _ := startFake(t, func(_ context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		if r.Local == "first" {
			<-second
		} else {
			close(second)
		}
		return &kept.Reply{Said: "done " + r.Local}, nil
	})
	c := NewClient(nc, WithTimeout(time.Minute))
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, local := range []string{"first", "second"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := snap
			r.Local = local
			_, err := c.SnapshotKept(context.Background(), r)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestServiceBoundsVerbsInFlight(t *testing.T) {
	var mu sync.Mutex
	cur, most := 0, 0
	nc, _ := startFake(t, func(context.Context, string, kept.Request) (*kept.Reply, error) {
		mu.Lock()
		cur++
		most = max(most, cur)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // widen the window a second verb would need
		mu.Lock()
		cur--
		mu.Unlock()
		return &kept.Reply{Said: "ok"}, nil
	}, WithMaxInFlight(2))
	c := NewClient(nc, WithTimeout(time.Minute))
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A cheap verb: heavy ones have their own bound (WithMaxHeavy).
			r := kept.Request{Module: "billing", Local: fmt.Sprintf("l%d", i)}
			if _, err := c.ListKept(context.Background(), r); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if most > 2 {
		t.Fatalf("%d verbs ran at once, bound is 2", most)
	}
}

func TestServiceStopWaitsForVerbInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	nc, svc := startFake(t, func(ctx context.Context, _ string, _ kept.Request) (*kept.Reply, error) {
		close(entered)
		<-release
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &kept.Reply{Said: "restored."}, nil
	})
	c := NewClient(nc, WithTimeout(time.Minute))
	replied := make(chan error, 1)
	go func() {
		r := snap
		r.Why = "test"
		_, err := c.RestoreKept(context.Background(), r)
		replied <- err
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Stop() }()
	// Stop cannot have returned: the verb is still held.
	for svcStoppedFlag(svc) == false {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while a verb was in flight")
	default:
	}
	// New requests are no longer taken.
	if _, err := c.ListKept(context.Background(), kept.Request{}); !errors.Is(err, kept.ErrNoBus) {
		t.Fatalf("request after Stop: %v", err)
	}
	close(release)
	if err := <-replied; err != nil {
		t.Fatalf("verb in flight did not finish: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := svc.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func svcStoppedFlag(s *Service) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

func TestServiceStopsWithContext(t *testing.T) {
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := Serve(ctx, nc, &fakeEngine{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-svc.done
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewClient(nc).ListKept(context.Background(), kept.Request{}); !errors.Is(err, kept.ErrNoBus) {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestProgressThrottle(t *testing.T) {
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	got := make(chan kept.Progress, 10)
	stop, err := NewClient(nc).WatchProgress("billing", "ledger", func(p kept.Progress) { got <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p := newProgress(nc, DefaultPrefix, "billing", "ledger")
	first := kept.Progress{Verb: kept.VerbSnapshot, Module: "billing", Local: "ledger", Step: "snapshot", StreamsTotal: 2, Bytes: 10}
	if !p.publish(first) {
		t.Fatal("the first report was not sent")
	}
	if p.publish(kept.Progress{Step: "snapshot", Bytes: 20}) {
		t.Fatalf("a second report within %v was sent", ProgressEvery)
	}
	if r := <-got; r != first {
		t.Fatalf("progress %+v, want %+v", r, first)
	}
	p.last = p.last.Add(-ProgressEvery)
	if !p.publish(kept.Progress{Step: "snapshot", Bytes: 30}) {
		t.Fatalf("a report after %v was not sent", ProgressEvery)
	}
	if r := <-got; r.Bytes != 30 {
		t.Fatalf("progress %+v", r)
	}
}

// $SRV.STATS tells the truth: each failure reply is counted as an error, and
// the processing time covers the whole verb, though every verb runs in its own
// goroutine. Both micro's wire protocol and the real `nats micro` CLI see it.
func TestServiceStatsCoverTheWholeVerb(t *testing.T) {
	const slow = 300 * time.Millisecond
	nc, svc := startFake(t, func(_ context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		if err := cannedFailure(r.Local); err != nil {
			return nil, err
		}
		if r.Local == "slow" {
			time.Sleep(slow)
		}
		return &kept.Reply{Said: verb + " done."}, nil
	})
	c := NewClient(nc, WithTimeout(time.Minute))
	ctx := context.Background()
	for _, local := range []string{"missing", "held", "broken"} {
		r := snap
		r.Local = local
		if _, err := c.SnapshotKept(ctx, r); err == nil {
			t.Fatalf("%s: no error", local)
		}
	}
	r := snap
	r.Local = "slow"
	if _, err := c.VerifyKept(ctx, r); err != nil {
		t.Fatal(err)
	}

	check := func(how string, st *micro.Stats) {
		t.Helper()
		if st.Name != ServiceName || st.ID != svc.Info().ID || st.Type != micro.StatsResponseType || len(st.Endpoints) != len(Verbs()) {
			t.Fatalf("%s: stats %+v", how, st)
		}
		for _, ep := range st.Endpoints {
			if ep.Subject != DefaultPrefix+"."+ep.Name || ep.QueueGroup != QueueGroup {
				t.Errorf("%s: endpoint %+v", how, ep)
			}
			switch ep.Name {
			case kept.VerbSnapshot:
				if ep.NumRequests != 3 || ep.NumErrors != 3 || !strings.HasPrefix(ep.LastError, "500:") || !strings.Contains(ep.LastError, "disk is full") {
					t.Errorf("%s: snapshot-kept after a 404, a 409 and a 500: %+v", how, ep)
				}
			case kept.VerbVerify:
				if ep.NumRequests != 1 || ep.NumErrors != 0 || ep.ProcessingTime < slow || ep.AverageProcessingTime < slow {
					t.Errorf("%s: verify-kept that took at least %v: %+v", how, slow, ep)
				}
			default:
				if ep.NumRequests != 0 {
					t.Errorf("%s: %+v", how, ep)
				}
			}
		}
	}

	// As micro's clients ask: $SRV.STATS.<name>.
	msg, err := nc.Request("$SRV.STATS."+ServiceName, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	check("$SRV.STATS", &st)

	// As the nats CLI shows them.
	natsCLI := tools.NatsCLI(t)
	home := t.TempDir()
	cli := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(natsCLI, append([]string{"--server", nc.ConnectedUrl()}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "NATS_CONTEXT=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("nats %v: %v\n%s", args, err, out)
		}
		return out
	}
	var cliStats []*micro.Stats
	if out := cli("micro", "stats", ServiceName, "--json"); json.Unmarshal(out, &cliStats) != nil || len(cliStats) != 1 {
		t.Fatalf("nats micro stats --json printed %s", out)
	}
	check("nats micro stats", cliStats[0])
	var info struct {
		Info  micro.Info  `json:"info"`
		Stats micro.Stats `json:"stats"`
	}
	if out := cli("micro", "info", ServiceName, "--json"); json.Unmarshal(out, &info) != nil || len(info.Info.Endpoints) != len(Verbs()) {
		t.Fatalf("nats micro info --json printed %s", out)
	}
	check("nats micro info (this instance's stats)", &info.Stats)
	for _, args := range [][]string{{"micro", "ls"}, {"micro", "ping", ServiceName}} {
		if out := cli(args...); !strings.Contains(string(out), ServiceName) {
			t.Errorf("nats %v does not show %s:\n%s", args, ServiceName, out)
		}
	}
}

// A verb stuck until its context ends does not hold Stop forever: after the
// stop timeout Stop cancels the verb's context, the verb sees it, and Stop
// returns an error that says the verb was cut short.
func TestServiceStopCutsAStuckVerbShort(t *testing.T) {
	entered, sawCancel := make(chan struct{}), make(chan error, 1)
	nc, svc := startFake(t, func(ctx context.Context, _ string, _ kept.Request) (*kept.Reply, error) {
		close(entered)
		<-ctx.Done()
		sawCancel <- ctx.Err()
		return nil, fmt.Errorf("%w: the restore was cut short: %w", kept.ErrFailed, ctx.Err())
	}, WithStopTimeout(300*time.Millisecond))
	c := NewClient(nc, WithTimeout(time.Minute))
	replied := make(chan error, 1)
	go func() {
		r := snap
		r.Why = "test"
		_, err := c.RestoreKept(context.Background(), r)
		replied <- err
	}()
	<-entered
	err := svc.Stop()
	if !errors.Is(err, kept.ErrFailed) || !strings.Contains(err.Error(), "cut short") ||
		!strings.Contains(err.Error(), "restore-kept of billing/ledger") {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case cerr := <-sawCancel:
		if !errors.Is(cerr, context.Canceled) {
			t.Fatalf("the verb's context ended with %v", cerr)
		}
	default:
		t.Fatal("Stop returned before the verb saw its context cancelled")
	}
	if rerr := <-replied; !errors.Is(rerr, kept.ErrFailed) {
		t.Fatalf("the cut verb's caller got %v", rerr)
	}
	if again := svc.Stop(); again == nil || again.Error() != err.Error() {
		t.Fatalf("second Stop: %v", again)
	}
}

// TestClientWaitsForAKeeperToSubscribe: with WithNoResponderWait, a request
// sent while no keeper serves (as while keepers reconnect after their
// server died) is sent again and answered once one serves; without a
// keeper in the wait, it fails as no responders do.
func TestClientWaitsForAKeeperToSubscribe(t *testing.T) {
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	got := make(chan error, 1)
	go func() {
		_, err := NewClient(nc, WithNoResponderWait(time.Minute)).ListKept(context.Background(), kept.Request{Module: "billing"})
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	var calls atomic.Int32
	svc, err := Serve(context.Background(), nc, &fakeEngine{fn: func(context.Context, string, kept.Request) (*kept.Reply, error) {
		calls.Add(1)
		return &kept.Reply{Said: "listed"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := <-got; err != nil {
		t.Fatalf("the request sent before a keeper served: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the keeper heard the request %d times, want once", n)
	}
	_, err = NewClient(nc, WithPrefix("nobody-here"), WithNoResponderWait(500*time.Millisecond)).ListKept(context.Background(), kept.Request{})
	if !errors.Is(err, kept.ErrNoBus) || !strings.Contains(err.Error(), "no nats-keeper answers") {
		t.Errorf("with no keeper in the wait: %v", err)
	}
}
