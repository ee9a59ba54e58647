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

// TestCopyIncrementalPoint: copy of an incremental point is refused, naming
// the point of its moment and how to make it, until a verify-kept made that
// point; then the incremental point is copied as a full point at its own
// place (no incremental, base or through in its record; the moment point's
// archive, checksum and streams), and a keeper on the copy, on another bus,
// restores it to the kept data as it was at the point, message by message.
func TestCopyIncrementalPoint(t *testing.T) {
	b := newBed(t)
	stop := captureOn(t, b)
	if err := sample.Change(b.Ctx, b.JS, module, local); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // a segment and a positions sample after the change
	names := sample.NamesOf(module, local)
	was, err := sample.Dump(b.Ctx, b.JS, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	inc := snapshot(t, b, 1, "inc")
	stop()
	if !inc.Point.Incremental || inc.Point.Base == "" || inc.Point.At == nil {
		t.Fatalf("snapshot-kept with capture on took no incremental point: %s", inc.Said)
	}
	rel := inc.Point.Dir
	to := t.TempDir()
	copyAll := func() (*transfer.CopyReport, error) {
		return transfer.CopyStores(b.Ctx, testbed.FileStore(t, b.Dir), testbed.FileStore(t, to), module, local, nil)
	}

	rep, err := copyAll()
	if !errors.Is(err, kept.ErrFailed) || len(rep.Failed) != 1 || !strings.HasPrefix(rep.Failed[0], rel+": ") ||
		!strings.Contains(rep.Failed[0], "is an incremental point") || !strings.Contains(rep.Failed[0], "-at-") ||
		!strings.Contains(rep.Failed[0], "is not made yet (verify-kept of it makes it), so it was not copied") {
		t.Fatalf("copy before the moment's point is made: %+v, %v", rep, err)
	}
	t.Logf("refused: %s", rep.Failed[0])
	if _, err := os.Stat(filepath.Join(to, rel, "point.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused copy left a record in the target: %v", err)
	}

	if _, err := b.Keeper.VerifyKept(b.Ctx, req(1, "inc")); err != nil {
		t.Fatalf("verify-kept of the incremental point: %v", err)
	}
	rep, err = copyAll()
	if err != nil || !slices.Contains(rep.Copied, rel) {
		t.Fatalf("copy once the moment's point is made: %+v, %v", rep, err)
	}
	got := readPoint(t, filepath.Join(to, rel, "point.json"))
	moment := readPoint(t, filepath.Join(b.Dir, momentDir(t, b.Dir), "point.json"))
	if got["incremental"] != nil || got["base"] != nil || got["through"] != nil || got["at"] == nil ||
		got["fingerprint"] != "inc" || got["archive-sum"] != moment["archive-sum"] || got["archive-size"] != moment["archive-size"] {
		t.Fatalf("the copy's record is not the full point of the moment under the incremental point's names:\n%v\nthe moment's:\n%v", got, moment)
	}
	if !reflect.DeepEqual(got["streams"], moment["streams"]) {
		t.Fatalf("the copy's record names streams\n%v\nnot the moment's\n%v", got["streams"], moment["streams"])
	}
	var indexes int
	for _, s := range moment["streams"].([]any) {
		if ki, _ := s.(map[string]any)["key-index"].(map[string]any); ki != nil {
			indexes++
			if _, err := os.Stat(filepath.Join(to, rel, ki["object"].(string))); err != nil {
				t.Fatalf("the copy lacks the key index the moment's point names: %v", err)
			}
		}
	}
	t.Logf("the copy carries %d key index(es) of the moment's point", indexes)
	if rep, err := copyAll(); err != nil || !slices.Contains(rep.Skipped, rel) {
		t.Fatalf("copy again: %+v, %v; want the incremental point skipped", rep, err)
	}

	other := testbed.New(t, testbed.WithConfig(func(c *keeper.Config) { c.Version = "test" }),
		testbed.WithStore(func(t testing.TB, _ string) store.Store { return testbed.FileStore(t, to) }),
		testbed.WithData(func(ctx context.Context, js jetstream.JetStream) error { return sample.Create(ctx, js, module, local) }))
	if before, err := sample.Dump(other.Ctx, other.JS, names.Streams()...); err != nil || sample.Diff(was, before) == "" {
		t.Fatalf("the other bus holds the kept data as it was at the point already (%v): the restore would show nothing", err)
	}
	if _, err := other.Keeper.RestoreKept(other.Ctx, req(1, "inc")); err != nil {
		t.Fatalf("restore of the copied incremental point from the copy: %v", err)
	}
	now, err := sample.Dump(other.Ctx, other.JS, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(was, now); d != "" {
		t.Fatalf("the copied incremental point restored from the copy differs from the kept data at the point:\n%s", d)
	}
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
