package keeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// failFirstCutRecord fails, once, the commit of the record of the first
// segment cut at its bytes (its archive committed already).
type failFirstCutRecord struct {
	mu     sync.Mutex
	failed string // the record's key, once failed
}

func (f *failFirstCutRecord) wrap(c *keeper.Config) {
	fs := &fault.Store{}
	fs.Wrap(c)
	fs.OnCreate(func(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
		w, err := next(ctx, key)
		if err != nil || !strings.HasSuffix(key, "/segment.json") {
			return w, err
		}
		var data []byte
		return &fault.Writer{Writer: w,
			OnWrite: func(p []byte, _ int64) error { data = append(data, p...); return nil },
			OnCommit: func(ctx context.Context, commit func(context.Context) (store.Info, error)) (store.Info, error) {
				var seg struct{ Cut bool }
				f.mu.Lock()
				fail := f.failed == "" && json.Unmarshal(data, &seg) == nil && seg.Cut
				if fail {
					f.failed = key
				}
				f.mu.Unlock()
				if fail {
					w.Abort()
					return store.Info{}, errors.New("injected: the record of the first cut segment was not committed")
				}
				return commit(ctx)
			}}, nil
	})
}

// segmentRecord is what TestCutSegmentsFollowOn reads of a segment.json.
type segmentRecord struct {
	N           uint64    `json:"n"`
	Cut         bool      `json:"cut"`
	PositionsAt time.Time `json:"positions-at"`
	Streams     []struct {
		Name     string `json:"name"`
		From     uint64 `json:"from"`
		To       uint64 `json:"to"`
		Messages uint64 `json:"messages"`
	} `json:"streams"`
}

// TestCutSegmentsFollowOn: a burst cut into many segments, each after the
// first carrying the positions sample of the one before, and the record
// of the first cut one failing once: the chain's segments are numbered
// without a gap, each stream's ranges follow on from one segment to the
// next, no message is held twice, the consumers were sampled less often
// than once a segment, and a restore to a moment after the burst gives
// back the kept data as it is.
func TestCutSegmentsFollowOn(t *testing.T) {
	fail := &failFirstCutRecord{}
	e := newEnv(t, fail.wrap)
	stop := e.captureWith(kept.CaptureSettings{SegmentEvery: kept.Duration(time.Second), SegmentBytes: 64 << 10})
	defer stop()
	e.captureReaches(time.Now())
	for j := range 800 {
		if _, err := e.js.Publish(e.ctx, fmt.Sprintf("%s.%s.orders.burst", module, local), fmt.Appendf(nil, "%01024d", j)); err != nil {
			t.Fatal(err)
		}
	}
	want := messagesOnly(e.kept())
	after := time.Now()
	e.captureReaches(after)
	stop()
	fail.mu.Lock()
	failed := fail.failed
	fail.mu.Unlock()
	if failed == "" {
		t.Fatal("no cut segment's record was failed: the burst was not cut into segments")
	}
	recs := readSegmentRecords(t, e.dir)
	cut, held := 0, map[string]uint64{}
	for i, r := range recs {
		if r.N != uint64(i+1) {
			t.Fatalf("segment records are numbered %d at place %d: a gap or a leftover", r.N, i+1)
		}
		if r.Cut {
			cut++
		}
		for j, ss := range r.Streams {
			if i > 0 && ss.From != recs[i-1].Streams[j].To+1 {
				t.Errorf("segment %d takes stream %s from %d, the one before ended at %d", r.N, ss.Name, ss.From, recs[i-1].Streams[j].To)
			}
			held[ss.Name] += ss.Messages
		}
	}
	if cut < 2 {
		t.Fatalf("%d segment(s) cut at 64 KiB; the burst should make several", cut)
	}
	samples := map[time.Time]bool{}
	for _, r := range recs {
		samples[r.PositionsAt] = true
	}
	if len(samples) >= len(recs) {
		t.Errorf("%d segments carry %d positions samples: a segment after one cut should carry the sample before it", len(recs), len(samples))
	}
	if orders := held[e.names.Stream]; orders != 800 {
		t.Errorf("the segments hold %d messages of %s; the burst wrote 800 since the base", orders, e.names.Stream)
	}
	r := keeper.Request{Module: module, Local: local, At: after.UTC().Format(time.RFC3339Nano), Caller: "test", Why: "after the burst"}
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("the kept data differs from what it was after the burst:\n got: %s\nwant: %s", got, want)
	}
}

// readSegmentRecords reads every segment record of the one chain under
// dir, in number order.
func readSegmentRecords(t *testing.T, dir string) []segmentRecord {
	t.Helper()
	var recs []segmentRecord
	for _, name := range segmentFiles(t, dir, "segment.json") {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var r segmentRecord
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b segmentRecord) int { return int(a.N) - int(b.N) })
	return recs
}

// segmentFiles lists the files named name (a glob) in the segments of the
// one chain under dir.
func segmentFiles(t *testing.T, dir, name string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "capture", module, local, "*", "s*", name))
	if err != nil {
		t.Fatal(err)
	}
	return names
}
