package keeper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// TestListKeptReadsNoWholeChain: list-kept and an incremental point of a
// capture of many segments read the newest segment's record only (a 7-day
// window at a segment a second is some 600,000 of them, a day's chain
// 86,400), and list-kept still says how many segments the store holds and
// their archives' bytes, as the records do.
func TestListKeptReadsNoWholeChain(t *testing.T) {
	var counting atomic.Bool
	var reads atomic.Int64
	fs := &fault.Store{}
	e := newEnv(t, func(c *keeper.Config) {
		fs.Wrap(c)
		fs.OnOpen(func(ctx context.Context, key string, next fault.OpenFunc) (store.Object, error) {
			if counting.Load() && strings.HasSuffix(key, "/segment.json") {
				reads.Add(1)
			}
			return next(ctx, key)
		})
	})
	stop := e.captureWith(kept.CaptureSettings{SegmentEvery: kept.Duration(time.Second), SegmentBytes: 64 << 10})
	defer stop()
	e.captureReaches(time.Now())
	for j := range 600 {
		if _, err := e.js.Publish(e.ctx, fmt.Sprintf("%s.%s.orders.burst", module, local), fmt.Appendf(nil, "%01024d", j)); err != nil {
			t.Fatal(err)
		}
	}
	e.captureReaches(time.Now())
	counting.Store(true)
	rep, err := e.k.SnapshotKept(e.ctx, req(1, "incremental"))
	counting.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Point == nil || !rep.Point.Incremental {
		t.Fatalf("snapshot-kept with capture on took no incremental point: %s", rep.Said)
	}
	if n := reads.Swap(0); n > 2 {
		t.Errorf("the incremental point read %d segment records; it should read its last only (and one before it for a sample)", n)
	}
	stop()

	recs := readSegmentRecords(t, e.dir)
	var bytes int64
	for _, name := range segmentArchives(t, e.dir) {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		bytes += fi.Size()
	}
	if len(recs) < 8 {
		t.Fatalf("the burst made %d segments; the test needs several", len(recs))
	}
	counting.Store(true)
	rep, err = e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	counting.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Captures) != 1 {
		t.Fatalf("list-kept names %d captures, not 1", len(rep.Captures))
	}
	info := rep.Captures[0]
	if info.Segments != len(recs) || info.Bytes != bytes || info.Bases != 1 {
		t.Errorf("list-kept says %d segment(s) of %d bytes in %d chain(s); the store holds %d of %d bytes in 1", info.Segments, info.Bytes, info.Bases, len(recs), bytes)
	}
	if n := reads.Load(); n > 1 {
		t.Errorf("list-kept read %d segment records of %d; it should read the newest only", n, len(recs))
	}
	if info.To == nil || info.From == nil || info.To.Before(*info.From) {
		t.Errorf("list-kept's window is %v to %v", info.From, info.To)
	}
}

// segmentArchives lists the files of the one chain's segments other than
// their records: their archives.
func segmentArchives(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, name := range segmentFiles(t, dir, "*") {
		if filepath.Base(name) != "segment.json" {
			out = append(out, name)
		}
	}
	return out
}

// TestWindowHoldsWhileASegmentIsClaimed: while a round writes its segment,
// the capture's mark claims it, with the moment of the mark before (a
// round that found nothing new, a second after the last segment). list-kept's
// window keeps that moment then, instead of stepping back to the last
// segment's: a list-kept that came while a round wrote said the capture lagged
// by a second more than it did.
func TestWindowHoldsWhileASegmentIsClaimed(t *testing.T) {
	e := newEnv(t)
	stop := e.captureOn()
	e.captureReaches(time.Now())
	e.batch(1)
	time.Sleep(2500 * time.Millisecond) // rounds that find nothing new move the mark past the last segment
	e.captureReaches(time.Now().Add(-500 * time.Millisecond))
	stop()
	kv, err := e.js.KeyValue(e.ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	key := "capture-mark." + module + "." + local
	entry, err := kv.Get(e.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var mark struct {
		Chain string    `json:"chain"`
		N     uint64    `json:"n"`
		At    time.Time `json:"at"`
	}
	if err := json.Unmarshal(entry.Value(), &mark); err != nil {
		t.Fatal(err)
	}
	recs := readSegmentRecords(t, e.dir)
	if uint64(len(recs)) != mark.N {
		t.Fatalf("the mark says %d segments, the store holds %d", mark.N, len(recs))
	}
	window := func() time.Time {
		t.Helper()
		rep, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
		if err != nil || len(rep.Captures) != 1 || rep.Captures[0].To == nil {
			t.Fatalf("list-kept: %v, %+v", err, rep)
		}
		return *rep.Captures[0].To
	}
	if got := window(); !got.Equal(mark.At) {
		t.Fatalf("the window ends at %s, the mark says %s", got, mark.At)
	}
	// The claim of the next segment, as a round writes it before the segment.
	mark.N++
	claim, err := json.Marshal(mark)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(e.ctx, key, claim); err != nil {
		t.Fatal(err)
	}
	if got := window(); !got.Equal(mark.At) {
		t.Errorf("with segment %d claimed, the window ends at %s, not at the mark's %s", mark.N, got, mark.At)
	}
}
