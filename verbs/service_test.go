package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// fakeEngine answers every verb with fn.
type fakeEngine struct {
	fn func(ctx context.Context, verb string, r keeper.Request) (*keeper.Reply, error)
}

func (f *fakeEngine) SnapshotKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	return f.fn(ctx, VerbSnapshot, r)
}
func (f *fakeEngine) RestoreKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	return f.fn(ctx, VerbRestore, r)
}
func (f *fakeEngine) DiscardAside(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	return f.fn(ctx, VerbDiscard, r)
}
func (f *fakeEngine) ListKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	return f.fn(ctx, VerbList, r)
}
func (f *fakeEngine) VerifyKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error) {
	return f.fn(ctx, VerbVerify, r)
}

func startFake(t *testing.T, fn func(context.Context, string, keeper.Request) (*keeper.Reply, error), opts ...Option) (*nats.Conn, *Service) {
	t.Helper()
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	svc, err := serve(context.Background(), nc, &fakeEngine{fn: fn}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	return nc, svc
}

var snap = keeper.Request{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "f1", Caller: "test"}

func TestServiceRepliesAndErrors(t *testing.T) {
	nc, _ := startFake(t, func(_ context.Context, verb string, r keeper.Request) (*keeper.Reply, error) {
		switch r.Local {
		case "missing":
			return nil, fmt.Errorf("%w: no stream of billing_missing, so nothing was kept", keeper.ErrNotFound)
		case "held":
			return nil, fmt.Errorf("%w: billing.held is held by restore-kept, so nothing was done", keeper.ErrBusy)
		case "broken":
			return nil, fmt.Errorf("%w: the disk is full,\nso no point was made", keeper.ErrFailed)
		case "silent":
			return nil, nil
		case "panics":
			panic("boom")
		}
		return &keeper.Reply{Said: verb + " of " + r.Module + "." + r.Local + " done.", Dir: "points/x"}, nil
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
		{"missing", 404, keeper.ErrNotFound},
		{"held", 409, keeper.ErrConflict},
		{"broken", 500, keeper.ErrFailed},
		{"silent", 500, keeper.ErrFailed},
		{"panics", 500, keeper.ErrFailed},
	} {
		r := snap
		r.Local = tc.local
		_, err := c.SnapshotKept(ctx, r)
		var ve *Error
		if !errors.As(err, &ve) || ve.Code != tc.code || !errors.Is(err, tc.is) {
			t.Errorf("%s: got %v (%#v), want code %d", tc.local, err, ve, tc.code)
		}
		if keeper.ExitCode(err) != keeper.ExitCode(tc.is) {
			t.Errorf("%s: exit code %d", tc.local, keeper.ExitCode(err))
		}
	}

	// A bad request through the raw bus: headers and JSON body.
	msg, err := nc.Request(DefaultPrefix+"."+VerbSnapshot, []byte(`{"module":"a","local":"b","fingerprint":"f","extra":1}`), time.Minute)
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
	msg, err = nc.Request(DefaultPrefix+"."+VerbSnapshot, mustJSON(t, r), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if h := msg.Header.Get(micro.ErrorHeader); strings.Contains(h, "\n") || !strings.Contains(h, "disk is full") {
		t.Fatalf("header %q", h)
	}
	if err := json.Unmarshal(msg.Data, &eb); err != nil || !strings.Contains(eb.Error, "full,\nso") {
		t.Fatalf("body %s: %v", msg.Data, err)
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
	_, err := NewClient(nc, WithPrefix("nobody-here")).ListKept(context.Background(), keeper.Request{})
	if !errors.Is(err, keeper.ErrNoBus) || keeper.ExitCode(err) != keeper.ExitNoService {
		t.Fatalf("got %v", err)
	}
}

func TestServiceInfo(t *testing.T) {
	nc, svc := startFake(t, nil, WithPrefix("ops.keeper"), WithVersion("v1.2.3"))
	info := svc.Info()
	if info.Name != ServiceName || info.Version != "1.2.3" || len(info.Endpoints) != len(Verbs) {
		t.Fatalf("info %+v", info)
	}
	for i, ep := range info.Endpoints {
		if ep.Subject != "ops.keeper."+Verbs[i] || ep.QueueGroup != QueueGroup {
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
	nc, _ := startFake(t, func(_ context.Context, verb string, r keeper.Request) (*keeper.Reply, error) {
		if r.Local == "first" {
			<-second
		} else {
			close(second)
		}
		return &keeper.Reply{Said: "done " + r.Local}, nil
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
	nc, _ := startFake(t, func(context.Context, string, keeper.Request) (*keeper.Reply, error) {
		mu.Lock()
		cur++
		most = max(most, cur)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // widen the window a second verb would need
		mu.Lock()
		cur--
		mu.Unlock()
		return &keeper.Reply{Said: "ok"}, nil
	}, WithMaxInFlight(2))
	c := NewClient(nc, WithTimeout(time.Minute))
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := snap
			r.Local = fmt.Sprintf("l%d", i)
			if _, err := c.VerifyKept(context.Background(), r); err != nil {
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
	nc, svc := startFake(t, func(ctx context.Context, _ string, _ keeper.Request) (*keeper.Reply, error) {
		close(entered)
		<-release
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &keeper.Reply{Said: "restored."}, nil
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
	if _, err := c.ListKept(context.Background(), keeper.Request{}); !errors.Is(err, keeper.ErrNoBus) {
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
	svc, err := serve(ctx, nc, &fakeEngine{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-svc.done
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewClient(nc).ListKept(context.Background(), keeper.Request{}); !errors.Is(err, keeper.ErrNoBus) {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestProgressThrottle(t *testing.T) {
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	got := make(chan keeper.Progress, 10)
	stop, err := NewClient(nc).WatchProgress("billing", "ledger", func(p keeper.Progress) { got <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p := newProgress(nc, DefaultPrefix, "billing", "ledger")
	first := keeper.Progress{Verb: VerbSnapshot, Module: "billing", Local: "ledger", Step: "snapshot", StreamsTotal: 2, Bytes: 10}
	if !p.publish(first) {
		t.Fatal("the first report was not sent")
	}
	if p.publish(keeper.Progress{Step: "snapshot", Bytes: 20}) {
		t.Fatalf("a second report within %v was sent", ProgressEvery)
	}
	if r := <-got; r != first {
		t.Fatalf("progress %+v, want %+v", r, first)
	}
	p.last = p.last.Add(-ProgressEvery)
	if !p.publish(keeper.Progress{Step: "snapshot", Bytes: 30}) {
		t.Fatalf("a report after %v was not sent", ProgressEvery)
	}
	if r := <-got; r.Bytes != 30 {
		t.Fatalf("progress %+v", r)
	}
}
