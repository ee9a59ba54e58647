package transfer_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/transfer"
)

// TestCopyIncrementalPoint: copy of an incremental point before any keeper
// made the point of its moment composes its archive from the base and
// segments into the target, checked as it is written and verified there
// whole, under a record of the incremental point as a full point (no
// incremental, base or through), and writes nothing into the source; a
// second copy skips it, and a keeper on the copy, on another bus, restores
// it to the kept data as it was at the point, message by message. Without a
// composer it is refused, naming the point of its moment, until a dry run
// of restore-kept made that point; then the moment's point's archive is
// copied under the incremental point's names, holding the same streams.
func TestCopyIncrementalPoint(t *testing.T) {
	b := newBed(t)
	names := sample.NamesOf(module, local)
	var was *sample.Snapshot
	inc := changedIncremental(t, b, func() {
		var err error
		if was, err = sample.Dump(b.Ctx, b.JS, names.Streams()...); err != nil {
			t.Fatal(err)
		}
	})
	rel := inc.Point.Dir
	compose := func(ctx context.Context, st store.Store, rec *kept.Point) (transfer.ComposedArchive, error) {
		return keeper.ComposeMoment(ctx, keeper.ComposeConfig{Store: st, Version: "test"}, rec)
	}
	copyAll := func(to string, compose transfer.Composer) (*transfer.CopyReport, error) {
		return transfer.CopyStores(b.Ctx, testbed.FileStore(t, b.Dir), testbed.FileStore(t, to), module, local, nil, compose)
	}

	composed := t.TempDir()
	rep, err := copyAll(composed, compose)
	if err != nil || !slices.Contains(rep.Copied, rel) {
		t.Fatalf("copy before the moment's point is made: %+v, %v", rep, err)
	}
	got := readPoint(t, filepath.Join(composed, rel, "point.json"))
	if got["incremental"] != nil || got["base"] != nil || got["through"] != nil || got["at"] == nil ||
		got["fingerprint"] != "inc" || got["archive-sum"] == nil || got["archive-size"] == nil || got["written-by"] != "test" {
		t.Fatalf("the composed copy's record is not the incremental point as a full point:\n%v", got)
	}
	if m, _ := filepath.Glob(filepath.Join(b.Dir, "points", module, local, "f*-at-*")); len(m) != 0 {
		t.Fatalf("the copy wrote the point of the moment into the source: %v", m)
	}
	if rep, err := copyAll(composed, compose); err != nil || !slices.Contains(rep.Skipped, rel) {
		t.Fatalf("copy again: %+v, %v; want the incremental point skipped", rep, err)
	}

	made := t.TempDir()
	rep, err = copyAll(made, nil)
	if !errors.Is(err, kept.ErrFailed) || len(rep.Failed) != 1 || !strings.HasPrefix(rep.Failed[0], rel+": ") ||
		!strings.Contains(rep.Failed[0], "is an incremental point") || !strings.Contains(rep.Failed[0], "-at-") ||
		!strings.Contains(rep.Failed[0], "is not made yet (a restore-kept of it, a dry run too, makes it), so it was not copied") {
		t.Fatalf("copy without a composer before the moment's point is made: %+v, %v", rep, err)
	}
	if _, err := os.Stat(filepath.Join(made, rel, "point.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused copy left a record in the target: %v", err)
	}
	dry := req(1, "inc")
	dry.DryRun = true
	if _, err := b.Keeper.RestoreKept(b.Ctx, dry); err != nil {
		t.Fatalf("a dry run of restore-kept of the incremental point: %v", err)
	}
	rep, err = copyAll(made, nil)
	if err != nil || !slices.Contains(rep.Copied, rel) {
		t.Fatalf("copy once the moment's point is made: %+v, %v", rep, err)
	}
	fromMade := readPoint(t, filepath.Join(made, rel, "point.json"))
	moment := readPoint(t, filepath.Join(b.Dir, momentDir(t, b.Dir), "point.json"))
	if fromMade["incremental"] != nil || fromMade["base"] != nil || fromMade["through"] != nil || fromMade["at"] == nil ||
		fromMade["fingerprint"] != "inc" || fromMade["archive-sum"] != moment["archive-sum"] || fromMade["archive-size"] != moment["archive-size"] {
		t.Fatalf("the copy's record is not the full point of the moment under the incremental point's names:\n%v\nthe moment's:\n%v", fromMade, moment)
	}
	for _, key := range []string{"streams", "positions", "at", "taken"} {
		if !reflect.DeepEqual(fromMade[key], moment[key]) && key == "streams" {
			t.Fatalf("the copy's record names streams\n%v\nnot the moment's\n%v", fromMade[key], moment[key])
		}
		if !reflect.DeepEqual(got[key], fromMade[key]) {
			t.Fatalf("the composed copy's %s\n%v\ndiffers from the copy of the moment's point\n%v", key, got[key], fromMade[key])
		}
	}

	other := testbed.New(t, testbed.WithConfig(func(c *keeper.Config) { c.Version = "test" }),
		testbed.WithStore(func(t testing.TB, _ string) store.Store { return testbed.FileStore(t, composed) }),
		testbed.WithData(func(ctx context.Context, js jetstream.JetStream) error { return sample.Create(ctx, js, module, local) }))
	if before, err := sample.Dump(other.Ctx, other.JS, names.Streams()...); err != nil || sample.Diff(was, before) == "" {
		t.Fatalf("the other bus holds the kept data as it was at the point already (%v): the restore would show nothing", err)
	}
	if _, err := other.Keeper.RestoreKept(other.Ctx, req(1, "inc")); err != nil {
		t.Fatalf("restore of the composed copy of the incremental point: %v", err)
	}
	now, err := sample.Dump(other.Ctx, other.JS, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(was, now); d != "" {
		t.Fatalf("the composed copy of the incremental point restored from the copy differs from the kept data at the point:\n%s", d)
	}
}

// changedIncremental takes the incremental point f1-inc of the sample kept
// data on b, captured, after sample.Change and a segment and a positions
// sample after it; atPoint runs just before it is taken.
func changedIncremental(t *testing.T, b *testbed.Bed, atPoint func()) *keeper.Reply {
	t.Helper()
	stop := captureOn(t, b)
	if err := sample.Change(b.Ctx, b.JS, module, local); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	atPoint()
	inc := snapshot(t, b, 1, "inc")
	stop()
	if !inc.Point.Incremental || inc.Point.Base == "" || inc.Point.At == nil {
		t.Fatalf("snapshot-kept with capture on took no incremental point: %s", inc.Said)
	}
	return inc
}

// captureOn turns capture of the sample kept data on, every second, runs
// it on b's keeper until the returned stop is called, and waits for the
// captured window to reach the moment it was turned on.
func captureOn(t *testing.T, b *testbed.Bed) (stop func()) {
	t.Helper()
	began := time.Now()
	settings := kept.CaptureSettings{SegmentEvery: kept.Duration(time.Second)}
	r := keeper.Request{Module: module, Local: local, Capture: "on", Caller: "test", Why: "testing capture", Settings: &settings}
	if _, err := b.Keeper.CaptureKept(b.Ctx, r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Ctx)
	done := make(chan error, 1)
	go func() { done <- b.Keeper.RunCapture(ctx, module, local) }()
	stop = func() {
		if cancel == nil {
			return
		}
		cancel()
		cancel = nil
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("the capture ended: %v", err)
		}
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rep, err := b.Keeper.ListKept(b.Ctx, keeper.Request{Module: module, Local: local})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Captures) == 1 && rep.Captures[0].To != nil && !rep.Captures[0].To.Before(began) {
			return stop
		}
		if time.Now().After(deadline) {
			t.Fatalf("the capture did not reach %s in 30 s: %+v", began, rep.Captures)
		}
	}
}

// readPoint is the point.json at path as JSON's values.
func readPoint(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// momentDir is the place of the one point of a moment (at its base's form) in the
// store in dir.
func momentDir(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "points", module, local, "f*-at-*"))
	if err != nil || len(m) != 1 {
		t.Fatalf("the points of a moment in %s: %v, %v; want one", dir, m, err)
	}
	rel, _ := filepath.Rel(dir, m[0])
	return rel
}
