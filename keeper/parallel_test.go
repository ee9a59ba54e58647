package keeper_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// parallelEnv is an env whose keeper takes and restores n streams at once,
// spooling into spool (a directory of the test's) with a memory budget of
// two 4 KiB chunks, so that the sample's streams spill into spool files.
// Its debug log goes to the returned buffer.
func parallelEnv(t *testing.T, n int, opts ...envOption) (*env, string, *syncbuf.Buffer) {
	t.Helper()
	spool := t.TempDir()
	logs := &syncbuf.Buffer{}
	opts = append([]envOption{func(c *keeper.Config) {
		c.StreamParallel, c.SpoolDir = n, spool
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}}, opts...)
	e := newEnv(t, opts...)
	keeper.SetSpoolMemory(e.k, 8<<10, 4<<10)
	return e, spool, logs
}

// TestParallelSnapshotRestore takes the point of a kept data of a KV
// bucket, an object store and a stream with 3 streams at once (spooled to
// files), restores it over the live data and into absent data with 3 at
// once, and gets the same data each time; the aside, taken at once too,
// holds the live data exactly.
func TestParallelSnapshotRestore(t *testing.T) {
	e, spool, logs := parallelEnv(t, 3)
	before := e.kept()
	snap := e.snapshot(1, "par")
	if got := len(snap.Point.Streams); got != 3 {
		t.Fatalf("point streams: %d, want 3", got)
	}
	if !strings.Contains(logs.String(), "spooled until its turn") {
		t.Errorf("no stream was spooled to a file; the log:\n%s", logs.String())
	}
	keeper.NoFiles(t, spool)
	if d := sample.Diff(before, archiveStreams(t, snap.Dir)); d != "" {
		t.Fatalf("the point taken 3 at once differs from the live data:\n%s", d)
	}
	// Streams stay in the order a serial snapshot gives them.
	for i, s := range snap.Point.Streams {
		if s.Name != e.names.Streams()[i] {
			t.Errorf("stream %d of the point is %s, want %s", i, s.Name, e.names.Streams()[i])
		}
	}

	e.change()
	changed := e.kept()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "par"))
	if err != nil {
		t.Fatalf("restore-kept over live data: %v", err)
	}
	if d := diffKept(e, before); d != "" {
		t.Errorf("after the restore over live data:\n%s", d)
	}
	if d := sample.Diff(changed, archiveStreams(t, rep.Dir)); d != "" {
		t.Errorf("the aside taken 3 at once differs from the live data it set aside:\n%s", d)
	}
	keeper.NoFiles(t, spool)

	e.removeKept()
	if _, err := e.k.RestoreKept(e.ctx, req(1, "par")); err != nil {
		t.Fatalf("restore-kept into absent data: %v", err)
	}
	if d := diffKept(e, before); d != "" {
		t.Errorf("after the restore into absent data:\n%s", d)
	}
}

// TestParallelSnapshotMatchesSerial: a point taken one stream at a time
// and one taken three at once hold the same data.
func TestParallelSnapshotMatchesSerial(t *testing.T) {
	e, _, _ := parallelEnv(t, 3)
	at := e.snapshot(1, "atonce")
	serial, err := e.keeperOn(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	r := req(1, "serial")
	one, err := serial.SnapshotKept(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(archiveStreams(t, one.Dir), archiveStreams(t, at.Dir)); d != "" {
		t.Errorf("3 at once and one at a time differ:\n%s", d)
	}
}

// TestParallelFaults fails one stream of a snapshot, of a set-aside and of
// a restore that take 3 at once: no point is left, or the live data is put
// back whole from the aside.
func TestParallelFaults(t *testing.T) {
	t.Run("snapshot", func(t *testing.T) {
		f := &faults{}
		e, spool, _ := parallelEnv(t, 3, f.wrap)
		_, err := f.during("snapshot", 2, 0, func() (*keeper.Reply, error) { return e.k.SnapshotKept(e.ctx, req(1, "fails")) })
		if !errors.Is(err, keeper.ErrFailed) || !errors.Is(err, errInjected) {
			t.Fatalf("got %v, want the injected failure", err)
		}
		mustContain(t, err.Error(), "snapshot of stream", "no point was written")
		list, lerr := e.k.ListKept(e.ctx, keeper.Request{Module: module})
		if lerr != nil || len(list.Points) != 0 {
			t.Fatalf("list after a failed snapshot: %v %+v", lerr, list)
		}
		keeper.NoFiles(t, spool)
	})
	for _, c := range []restoreFault{
		{"snapshot", 2, "live", []string{"setting the live data aside failed", "nothing was removed"}},
		{"restore", 1, "live", []string{"half-restored", "put back from aside"}},
		{"restore", 2, "live", []string{"half-restored", "put back from aside"}},
		{"restore", 3, "live", []string{"half-restored", "put back from aside"}},
	} {
		t.Run(c.name(), func(t *testing.T) {
			f := &faults{}
			e, spool, _ := parallelEnv(t, 3, f.wrap)
			c.run(t, e, f)
			keeper.NoFiles(t, spool)
		})
	}
}

// restoreCount is the real bus; it counts the restores in flight at once.
type restoreCount struct {
	mu       sync.Mutex
	now, max int
}

// wrap puts c in front of cfg's bus.
func (c *restoreCount) wrap(cfg *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(cfg)
	f.OnRestore(func(ctx context.Context, s string, data, meta io.Reader, next fault.RestoreFunc) error {
		c.mu.Lock()
		c.now++
		c.max = max(c.max, c.now)
		c.mu.Unlock()
		defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
		return next(ctx, s, data, meta)
	})
}

// On a server of its own, a keeper of 3 streams at once restores streams
// at once too, over live data and into absent data (the bus takes the start
// of each restore one at a time: nats-server 2.15.3 can end its process on
// restores that begin together there), and takes its snapshots 3 at once.
func TestRestoresAtOnceOnAServerOfItsOwn(t *testing.T) {
	c := &restoreCount{}
	e, _, logs := parallelEnv(t, 3, c.wrap)
	before := e.kept()
	e.snapshot(1, "one")
	if !strings.Contains(logs.String(), "spooled until its turn") {
		t.Errorf("the snapshot did not take its streams at once; the log:\n%s", logs.String())
	}
	e.change()
	if _, err := e.k.RestoreKept(e.ctx, req(1, "one")); err != nil {
		t.Fatalf("restore-kept over live data: %v", err)
	}
	e.removeKept()
	if _, err := e.k.RestoreKept(e.ctx, req(1, "one")); err != nil {
		t.Fatalf("restore-kept into absent data: %v", err)
	}
	if d := diffKept(e, before); d != "" {
		t.Errorf("after the restores:\n%s", d)
	}
	if c.max < 2 {
		t.Errorf("%d restores were in flight at once, want the 3 streams at once", c.max)
	}
}
