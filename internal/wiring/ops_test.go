package wiring_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/internal/embedded"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// bed is a real nats-server on a fixed loopback port (so it can be stopped
// and started again on the same port and store) and a keeper started
// through wiring.Start, serving /metrics and /healthz.
type bed struct {
	t       *testing.T
	port    int
	natsDir string
	srv     *server.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	dir     string // the keeper's file store
	k       *wiring.Keeper
	client  *verbs.Client
}

func newBed(t *testing.T, s wiring.Setup) *bed {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &bed{t: t, port: l.Addr().(*net.TCPAddr).Port, natsDir: t.TempDir(), dir: t.TempDir()}
	_ = l.Close()
	b.startServer()
	t.Cleanup(func() {
		if b.srv != nil {
			embedded.Shutdown(b.srv)
		}
	})
	b.nc, err = nats.Connect(b.srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.nc.Close)
	if b.js, err = jetstream.New(b.nc); err != nil {
		t.Fatal(err)
	}
	st := testbed.FileStore(t, b.dir)
	s.Store = st
	s.MetricsListen = "127.0.0.1:0"
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	b.k, err = wiring.Start(context.Background(), b.nc, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.k.Stop() })
	b.client = verbs.NewClient(b.nc, verbs.WithTimeout(2*time.Minute))
	return b
}

func (b *bed) startServer() {
	b.t.Helper()
	o := embedded.Options(b.natsDir)
	o.Port = b.port
	s, err := embedded.Run(o)
	if err != nil {
		b.t.Fatal(err)
	}
	b.srv = s
}

// get fetches path from the metrics listener: its status and body.
func (b *bed) get(path string) (int, string) {
	b.t.Helper()
	resp, err := http.Get("http://" + b.k.MetricsAddr() + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// scrape reads /metrics into series → value, the series as the text format
// writes it (name{label="v",...}, labels sorted).
func (b *bed) scrape() map[string]float64 {
	b.t.Helper()
	code, body := b.get("/metrics")
	if code != http.StatusOK {
		b.t.Fatalf("/metrics answered %d: %s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			b.t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func want(t *testing.T, m map[string]float64, series string, v float64) {
	t.Helper()
	got, ok := m[series]
	if !ok {
		t.Errorf("no series %s in /metrics", series)
		return
	}
	if got != v {
		t.Errorf("%s = %v, want %v", series, got, v)
	}
}

var billing = kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "a", Caller: "test", Why: "ops test"}

// A scrape after a snapshot, a failed verify and a restore counts each verb
// by outcome, the bytes snapshotted and restored, what is kept, and the
// time of the last successful snapshot and restore; the same counts are in
// $SRV.STATS.
func TestMetricsAfterSnapshotFailedVerifyAndRestore(t *testing.T) {
	b := newBed(t, wiring.Setup{Version: "v1.4.0"})
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	first, err := b.client.SnapshotKept(ctx, billing)
	if err != nil {
		t.Fatal(err)
	}
	second := billing
	second.Fingerprint = "b"
	damaged, err := b.client.SnapshotKept(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(b.dir, damaged.Point.Dir, "bus.tar")
	data, err := os.ReadFile(tar)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(data) / 3; i < len(data)/3+64; i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(tar, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = b.client.VerifyKept(ctx, second)
	var verr *verbs.Error
	if !errors.As(err, &verr) {
		t.Fatalf("verify of a damaged point: %v, want a failure reply", err)
	}
	beforeRestore := time.Now()
	if _, err := b.client.RestoreKept(ctx, billing); err != nil {
		t.Fatal(err)
	}

	m := b.scrape()
	want(t, m, `nats_keeper_verb_requests_total{outcome="ok",verb="snapshot-kept"}`, 2)
	want(t, m, fmt.Sprintf(`nats_keeper_verb_requests_total{outcome="%s",verb="verify-kept"}`, outcome(verr.Code)), 1)
	want(t, m, `nats_keeper_verb_requests_total{outcome="ok",verb="restore-kept"}`, 1)
	// A test binary carries no VCS revision.
	want(t, m, fmt.Sprintf(`nats_keeper_build_info{goversion="%s",revision="",version="1.4.0"}`, runtime.Version()), 1)
	want(t, m, `nats_keeper_verb_duration_seconds_count{outcome="ok",verb="snapshot-kept"}`, 2)
	want(t, m, `nats_keeper_snapshot_bytes_total`, float64(first.Point.ArchiveSize+damaged.Point.ArchiveSize))
	want(t, m, `nats_keeper_restore_bytes_total`, float64(first.Point.ArchiveSize))
	want(t, m, `nats_keeper_points{local="ledger",module="billing"}`, 2)
	want(t, m, `nats_keeper_asides{local="ledger",module="billing"}`, 1)
	want(t, m, `nats_keeper_journals_open`, 0)
	want(t, m, `nats_keeper_leases_held`, 0)
	want(t, m, `nats_keeper_acts_queued`, 0)
	want(t, m, `nats_keeper_last_snapshot_success_timestamp_seconds{local="ledger",module="billing"}`,
		float64(damaged.Point.Taken.UnixNano())/1e9)
	if got := m[`nats_keeper_last_restore_success_timestamp_seconds{local="ledger",module="billing"}`]; got < float64(beforeRestore.Unix()) ||
		got > float64(time.Now().Unix()+1) {
		t.Errorf("last restore at %v, want between %v and now", got, beforeRestore.Unix())
	}
	if m[`nats_keeper_aside_bytes{local="ledger",module="billing"}`] <= 0 {
		t.Errorf("the aside has no bytes in /metrics")
	}

	// The same counts in `nats micro stats`.
	msg, err := b.nc.Request("$SRV.STATS."+verbs.ServiceName, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	data2 := map[string]map[string]any{}
	for _, e := range st.Endpoints {
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("%s data %s: %v", e.Name, e.Data, err)
		}
		data2[e.Name] = d
	}
	if got := data2[kept.VerbSnapshot]["outcomes"].(map[string]any)["ok"]; got != 2.0 {
		t.Errorf("micro stats: snapshot-kept ok = %v, want 2", got)
	}
	if got := data2[kept.VerbSnapshot]["bytes_total"]; got != float64(first.Point.ArchiveSize+damaged.Point.ArchiveSize) {
		t.Errorf("micro stats: snapshot-kept bytes_total = %v", got)
	}
	kept, _ := data2[kept.VerbList]["keeper"].(map[string]any)
	if kept["points"] != 2.0 || kept["asides"] != 1.0 || kept["journals_open"] != 0.0 {
		t.Errorf("micro stats: list-kept keeper data = %v", kept)
	}
}

func outcome(code int) string {
	switch code {
	case 400:
		return "bad_request"
	case 404:
		return "not_found"
	case 409:
		return "conflict"
	case 503:
		return "unavailable"
	}
	return "failed"
}

// /healthz answers 503 with the reason while the nats-server is stopped,
// and 200 again once it is back on the same port and store.
func TestHealthzFollowsTheBus(t *testing.T) {
	b := newBed(t, wiring.Setup{})
	if code, body := b.get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz with the bus up: %d %s", code, body)
	}
	embedded.Shutdown(b.srv)
	b.srv = nil
	// Until the client notices the server is gone, the index's silence is
	// the reason; then the lost connection is.
	waitHealth(t, b, http.StatusServiceUnavailable, "unhealthy: the keeper is not connected to the bus")
	b.startServer()
	waitHealth(t, b, http.StatusOK, "ok: connected to the bus, the index answers and the store is reachable")
}

// waitHealth asks /healthz until it answers code with a body that begins
// with said, for at most two minutes; every 503 on the way must give a
// reason.
func waitHealth(t *testing.T, b *bed, code int, said string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, body := b.get("/healthz")
		if got == code && strings.HasPrefix(body, said) {
			return
		}
		if got == http.StatusServiceUnavailable && !strings.HasPrefix(body, "unhealthy: ") {
			t.Fatalf("/healthz 503 without a reason: %q", body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz still answers %d (%q), want %d %q", got, body, code, said)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// With --max-heavy 2 and two restores running, a third heavy verb is
// refused at once (503, Retry-After), and list-kept answers while both
// restores still run.
func TestThirdHeavyVerbRefusedListStillAnswers(t *testing.T) {
	var hold atomic.Bool
	arrived := make(chan string, 4)
	release := make(chan struct{})
	b := newBed(t, wiring.Setup{MaxHeavy: 2, StepHook: func(step string) {
		if step == "journal-written" && hold.Load() {
			arrived <- step
			<-release
		}
	}})
	ctx := context.Background()
	// Three modules (not three kept data of one module, whose sample
	// consumers would share names across their streams).
	locals := []string{"a", "b", "c"}
	for _, l := range locals {
		if err := sample.Create(ctx, b.js, "shop"+l, "orders"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.client.SnapshotKept(ctx, kept.Request{Module: "shop" + l, Local: "orders", Form: 1, Fingerprint: "x", Caller: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	hold.Store(true)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, l := range locals[:2] {
		wg.Go(func() {
			_, err := b.client.RestoreKept(ctx, kept.Request{Module: "shop" + l, Local: "orders", Form: 1, Fingerprint: "x", Caller: "t", Why: "test"})
			errs <- err
		})
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
		wg.Wait()
	}()
	for range 2 {
		select {
		case <-arrived:
		case err := <-errs:
			t.Fatalf("a restore ended before it was held: %v", err)
		case <-time.After(2 * time.Minute):
			t.Fatal("the two restores did not reach their held step")
		}
	}
	// Both heavy slots are taken: a third heavy verb is refused at once.
	_, err := b.client.SnapshotKept(ctx, kept.Request{Module: "shopc", Local: "orders", Form: 1, Fingerprint: "y", Caller: "t"})
	var verr *verbs.Error
	if !errors.As(err, &verr) || verr.Code != 503 || verr.RetryAfter != verbs.RetryAfter || !errors.Is(err, kept.ErrBusy) ||
		!strings.Contains(verr.Said, "--max-heavy") {
		t.Fatalf("third heavy verb: %v (%#v), want a 503 with Retry-After naming --max-heavy", err, verr)
	}
	// Cheap verbs are not queued behind them: list-kept and a dry run answer
	// while both restores are still held.
	rep, err := b.client.ListKept(ctx, kept.Request{})
	if err != nil || len(rep.Points) != 3 {
		t.Fatalf("list-kept while two restores run: %v, %+v", err, rep)
	}
	if _, err := b.client.RestoreKept(ctx, kept.Request{Module: "shopc", Local: "orders", Form: 1, Fingerprint: "x", Caller: "t", Why: "plan", DryRun: true}); err != nil {
		t.Fatalf("a dry run while two restores run: %v", err)
	}
	select {
	case err := <-errs:
		t.Fatalf("a restore ended while held: %v", err)
	default:
	}
	m := b.scrape()
	want(t, m, `nats_keeper_leases_held`, 2*(1+3)) // each restore: its kept data's lease and its three streams'
	close(release)
	released = true
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a held restore, once released: %v", err)
		}
	}
}

// A restore past --verb-timeout is cancelled and fails saying so; the data
// stays whole: the restore is finished by recovery, the live data set aside.
func TestVerbTimeoutCancelsAndLeavesTheDataWhole(t *testing.T) {
	var hold atomic.Bool
	const timeout = 2 * time.Second
	b := newBed(t, wiring.Setup{VerbTimeout: timeout, StepHook: func(step string) {
		if step == "journal-written" && hold.Load() {
			time.Sleep(timeout + time.Second) // the verb's deadline passes here
		}
	}})
	ctx := context.Background()
	if err := sample.Create(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	names := sample.NamesOf("billing", "ledger")
	orig, err := sample.Dump(ctx, b.js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.SnapshotKept(ctx, billing); err != nil {
		t.Fatal(err)
	}
	if err := sample.Change(ctx, b.js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	hold.Store(true)
	full := billing
	full.Method = kept.MethodFull // the point exactly, last sequences too
	_, err = b.client.RestoreKept(ctx, full)
	hold.Store(false)
	if err == nil || !strings.Contains(err.Error(), "--verb-timeout of 2s") || !errors.Is(err, kept.ErrFailed) {
		t.Fatalf("restore past the verb timeout: %v", err)
	}
	// Recovery takes the interrupted restore up (every wiring.RecoverEvery).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		n, err := b.k.Keeper.OpenJournals(ctx)
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the interrupted restore's journal is still open (%d, %v)", n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	now, err := sample.Dump(ctx, b.js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(orig, now); d != "" {
		t.Errorf("after recovery the bus is not the point's data:\n%s", d)
	}
	rep, err := b.client.ListKept(ctx, kept.Request{Module: "billing", Local: "ledger"})
	if err != nil || len(rep.Asides) != 1 {
		t.Fatalf("the live data was not set aside: %v, %+v", err, rep)
	}
}

// A metrics address that is taken fails the start at once, before anything
// is done (exit 4 in serve), with a sentence that names the flag.
func TestMetricsAddressTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o := embedded.Options(t.TempDir())
	srv, err := embedded.Run(o)
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Shutdown(srv)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	st := testbed.FileStore(t, t.TempDir())
	_, err = wiring.Start(context.Background(), nc, wiring.Setup{Store: st, MetricsListen: l.Addr().String(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if !errors.Is(err, kept.ErrConflict) || !strings.HasPrefix(err.Error(), "cannot listen on "+l.Addr().String()) ||
		!strings.Contains(err.Error(), "so nothing is served; pick another address with --metrics-listen") {
		t.Fatalf("a taken metrics address: %v", err)
	}
	// Nothing was done: the keeper's index bucket was not made.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(context.Background(), wiring.DefaultBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("the index bucket after a refused start: %v", err)
	}
}
