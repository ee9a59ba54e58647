package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/kept"
)

// Heavy verbs beyond WithMaxHeavy are refused at once with a 503 and a
// Retry-After header; a dry run and list-kept are not heavy and answer
// while the heavy slots are taken; each answered request reaches the
// observer with its code.
func TestServiceAdmitsHeavyVerbsUpToTheBound(t *testing.T) {
	entered, release := make(chan string, 8), make(chan struct{})
	var mu sync.Mutex
	seen := map[string]int{}
	nc, _ := startFake(t, func(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error) {
		if verb == kept.VerbSnapshot || (verb == kept.VerbRestore && !r.DryRun) {
			entered <- verb
			<-release
		}
		return &kept.Reply{Said: verb + " done."}, nil
	}, WithMaxHeavy(2), WithObserver(func(verb string, code int, _ time.Duration) {
		mu.Lock()
		seen[verb+":"+strconv.Itoa(code)]++
		mu.Unlock()
	}))
	c := NewClient(nc, WithTimeout(time.Minute))
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, l := range []string{"a", "b"} {
		wg.Go(func() {
			r := snap
			r.Local = l
			if _, err := c.SnapshotKept(ctx, r); err != nil {
				t.Error(err)
			}
		})
	}
	defer wg.Wait()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	for range 2 {
		<-entered
	}
	_, err := c.RestoreKept(ctx, kept.Request{Module: "billing", Local: "c", Form: 1, Fingerprint: "f", Caller: "t", Why: "w"})
	var e *Error
	if !errors.As(err, &e) || e.Code != 503 || e.RetryAfter != RetryAfter || !errors.Is(err, kept.ErrBusy) || !errors.Is(err, kept.ErrNoBus) {
		t.Fatalf("third heavy verb: %v, want a 503 with Retry-After", err)
	}
	if !strings.Contains(e.Said, "nothing was done") || !strings.Contains(e.Said, "try again in 30s") {
		t.Errorf("the refusal says %q", e.Said)
	}
	if _, err := c.RestoreKept(ctx, kept.Request{Module: "billing", Local: "c", Form: 1, Fingerprint: "f", Caller: "t", Why: "w", DryRun: true}); err != nil {
		t.Errorf("a dry run while the heavy slots are taken: %v", err)
	}
	if _, err := c.ListKept(ctx, kept.Request{}); err != nil {
		t.Errorf("list-kept while the heavy slots are taken: %v", err)
	}
	close(release)
	released = true
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for k, n := range map[string]int{"snapshot-kept:200": 2, "restore-kept:503": 1, "restore-kept:200": 1, "list-kept:200": 1} {
		if seen[k] != n {
			t.Errorf("observer saw %s %d times, want %d (all: %v)", k, seen[k], n, seen)
		}
	}
}

// A heavy verb gives back its slot before its reply is sent: whoever has
// the reply may send the next heavy verb at once and is not refused as if
// the keeper still ran the first (a caller's snapshot-kept, then its
// restore-kept, on a keeper with --max-heavy 1).
func TestServiceFreesTheHeavySlotBeforeItReplies(t *testing.T) {
	var svc atomic.Pointer[Service]
	var held atomic.Int32 // heavy slots taken when a reply was recorded, summed
	nc, s := startFake(t, func(context.Context, string, kept.Request) (*kept.Reply, error) {
		return &kept.Reply{Said: "done."}, nil
	}, WithMaxHeavy(1), WithObserver(func(string, int, time.Duration) {
		held.Add(int32(len(svc.Load().heavy)))
	}))
	svc.Store(s)
	c := NewClient(nc, WithTimeout(time.Minute))
	ctx := context.Background()
	for i := range 50 {
		if _, err := c.SnapshotKept(ctx, snap); err != nil {
			t.Fatalf("snapshot-kept %d, sent once the one before was answered: %v", i, err)
		}
	}
	if n := held.Load(); n != 0 {
		t.Fatalf("a heavy slot was still taken when a reply was recorded (%d times)", n)
	}
}

// A verb past WithVerbTimeout is cancelled: its context ends, and the
// failure says the deadline passed.
func TestServiceVerbTimeout(t *testing.T) {
	nc, _ := startFake(t, func(ctx context.Context, _ string, _ kept.Request) (*kept.Reply, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}, WithVerbTimeout(200*time.Millisecond))
	_, err := NewClient(nc, WithTimeout(time.Minute)).VerifyKept(context.Background(), snap)
	var e *Error
	if !errors.As(err, &e) || e.Code != 500 || !strings.Contains(e.Said, "ran past the keeper's --verb-timeout of 200ms and was cancelled") {
		t.Fatalf("a verb past its deadline: %v", err)
	}
}

// WithStatsData's values join in_flight in each endpoint's data.
func TestServiceStatsData(t *testing.T) {
	nc, _ := startFake(t, func(context.Context, string, kept.Request) (*kept.Reply, error) {
		return &kept.Reply{Said: "ok"}, nil
	}, WithStatsData(func(verb string) map[string]any {
		return map[string]any{"verb_again": verb, "in_flight": "not this"}
	}))
	msg, err := nc.Request("$SRV.STATS."+ServiceName, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Endpoints) != len(Verbs()) {
		t.Fatalf("%d endpoints", len(st.Endpoints))
	}
	for _, e := range st.Endpoints {
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d["verb_again"] != e.Name || d["in_flight"] != 0.0 {
			t.Errorf("%s data %s", e.Name, e.Data)
		}
	}
}
