package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// appendMessages publishes n messages of batch to the sample's stream.
func (e *env) appendMessages(batch, n int) {
	e.t.Helper()
	for j := range n {
		m := nats.NewMsg(fmt.Sprintf("%s.%s.orders.appended", module, local))
		m.Header.Set("Batch", fmt.Sprint(batch))
		m.Data = fmt.Appendf(nil, "appended %d message %d %s", batch, j, strings.Repeat("y", j*41))
		if _, err := e.js.PublishMsg(e.ctx, m); err != nil {
			e.t.Fatal(err)
		}
	}
}

// captureMoment captures the sample kept data while messages are appended
// around a moment, and returns the moment and the messages as they were
// then; the kept data has changed since.
func (e *env) captureMoment() (time.Time, string) {
	e.t.Helper()
	stop := e.captureOn()
	defer stop()
	e.captureReaches(time.Now())
	e.appendMessages(1, 30)
	time.Sleep(1500 * time.Millisecond)
	at := time.Now().UTC()
	want := messagesOnly(e.kept())
	time.Sleep(1500 * time.Millisecond)
	e.appendMessages(2, 7)
	e.captureReaches(at.Add(200 * time.Millisecond))
	return at, want
}

// restoreSteps restores r and returns the reply and the steps its progress
// reported, in order and once each.
func (e *env) restoreSteps(r keeper.Request) (*keeper.Reply, []string, error) {
	var mu sync.Mutex
	var steps []string
	ctx := keeper.WithProgress(e.ctx, func(p keeper.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(steps, p.Step) {
			steps = append(steps, p.Step)
		}
	})
	rep, err := e.k.RestoreKept(ctx, r)
	mu.Lock()
	defer mu.Unlock()
	return rep, slices.Clone(steps), err
}

// TestMomentVerifiedAsWritten: a restore to a moment verifies the point it
// makes as it writes it and does not read it whole again (no verify step);
// its evidence's point check passes and says so, in the reply and in
// evidence.json. A dry run of a new moment plans from its point verified as
// written and changes nothing. The restore's streams take the full and
// delta methods (auto). A second restore of the same moment finds
// the point made and verifies it whole beside the set-aside, as any point.
// Each restore gives back the kept data as it was at its moment.
func TestMomentVerifiedAsWritten(t *testing.T) {
	e := newAutoEnv(t)
	at, want := e.captureMoment()
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Caller: "test", Why: "a moment"}

	dry := req
	dry.DryRun = true
	live := e.kept()
	if rep, steps, err := e.restoreSteps(dry); err != nil || !strings.Contains(rep.Said, "Dry run, nothing was changed") || slices.Contains(steps, "verify") {
		t.Fatalf("dry run of a new moment: %v, steps %v", err, steps)
	}
	if d := sample.Diff(live, e.kept()); d != "" {
		t.Fatalf("a dry run changed the bus:\n%s", d)
	}

	at2 := at.Add(time.Millisecond) // another moment, its point not yet made
	req.At = at2.Format(time.RFC3339Nano)
	rep, steps, err := e.restoreSteps(req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(steps, "moment") || slices.Contains(steps, "verify") {
		t.Errorf("the restore that made the point reported the steps %v: it must write the moment and not verify it again", steps)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("restored to the moment, the kept data differs:\n got: %s\nwant: %s", got, want)
	}
	pointChecked(t, rep, "verified as this restore wrote it")
	// Both methods took the verification made as written: the streams
	// only appended to since the moment are rolled back by delta.
	mustContain(t, rep.Said, "restored whole", "rolled back by delta", "billing_ledger delta")

	e.appendMessages(3, 4)
	rep, steps, err = e.restoreSteps(req)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(steps, "moment") || !slices.Contains(steps, "verify") {
		t.Errorf("the restore of a moment's point made before reported the steps %v: it must verify it whole and not make it again", steps)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("restored to the moment again, the kept data differs:\n got: %s\nwant: %s", got, want)
	}
	pointChecked(t, rep, "read whole and checked against its manifest while the live data was set aside")
}

// pointChecked checks that rep's evidence, in the reply and in its
// evidence.json, says its point check passed, verified as how says.
func pointChecked(t *testing.T, rep *keeper.Reply, how string) {
	t.Helper()
	if rep.Evidence == nil || rep.Evidence.Verdict != keeper.Pass {
		t.Fatalf("the restore's evidence: %+v", rep.Evidence)
	}
	for _, ev := range []*keeper.Evidence{rep.Evidence, storedEvidence(t, rep.Dir)} {
		c := checkOf(t, ev, keeper.CheckPointVerified)
		if c.Verdict != keeper.Pass || c.Archive == nil || c.Archive.BytesChecked <= 0 || !strings.Contains(c.Archive.How, how) ||
			c.Archive.Size != rep.Point.ArchiveSize {
			t.Errorf("point check %s %q, figures %+v; want it passed, %q", c.Verdict, c.Said, c.Archive, how)
		}
	}
}

// momentArchive reports whether key is the archive of a moment's point.
func momentArchive(key string) bool {
	return strings.Contains(key, "-at-") && strings.HasSuffix(key, "/bus.tar")
}

// isS2DataChunk reports whether p is one whole s2 data chunk, as the
// archive's writer hands it over.
func isS2DataChunk(p []byte) bool {
	return len(p) > 8 && (p[0] == 0x00 || p[0] == 0x01) && int(p[1])|int(p[2])<<8|int(p[3])<<16 == len(p)-4
}

// flipAMomentChunk makes fs change the last byte of the first whole s2
// data chunk written to a moment's point's archive, in the buffer the
// store's writer is handed (so the archive's own SHA-256 matches the
// damage), and reports whether it did.
func flipAMomentChunk(fs *fault.Store) *atomic.Bool {
	var flipped atomic.Bool
	fs.OnCreate(func(ctx context.Context, key string, next fault.CreateFunc) (store.Writer, error) {
		w, err := next(ctx, key)
		if err != nil || !momentArchive(key) {
			return w, err
		}
		return &fault.Writer{Writer: w, OnWrite: func(p []byte, _ int64) error {
			if isS2DataChunk(p) && flipped.CompareAndSwap(false, true) {
				p[len(p)-1] ^= 0x01
			}
			return nil
		}}, nil
	})
	return &flipped
}

// TestMomentRefusedAsWritten: bytes of a moment's point damaged as they
// are written (the store's writer changes one in the buffer it is handed,
// so the archive's own SHA-256 matches the damage) are found by the
// verification made as the point is written: the request fails, naming
// it, the point is not committed, nothing is set aside or removed; once
// the fault is gone the same moment is made and restored.
func TestMomentRefusedAsWritten(t *testing.T) {
	fs := &fault.Store{}
	e := newEnv(t, fs.Wrap)
	at, want := e.captureMoment()
	flipped := flipAMomentChunk(fs)
	before := e.kept()
	req := keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Caller: "test", Why: "a moment"}
	_, err := e.k.RestoreKept(e.ctx, req)
	if !flipped.Load() {
		t.Fatalf("no byte of the moment's point was damaged (%v)", err)
	}
	if !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("a moment's point damaged as written: got %v, want damaged", err)
	}
	mustContain(t, err.Error(), "checked as it was written", "failed verification", "stream.arc.s2",
		"it was not committed and nothing was set aside or removed")
	noAsideNoMoment(t, e, before)

	fs.OnCreate(nil)
	if _, err := e.k.RestoreKept(e.ctx, req); err != nil {
		t.Fatalf("the same moment once the fault is gone: %v", err)
	}
	if got := messagesOnly(e.kept()); got != want {
		t.Errorf("restored to the moment, the kept data differs:\n got: %s\nwant: %s", got, want)
	}
}

// flippedObject is a stored object whose byte at flip reads changed, as a
// store that damaged it after it was written would give it back.
type flippedObject struct {
	store.Object
	flip int64
}

func (o *flippedObject) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.Object.ReadAt(p, off)
	if o.flip >= off && o.flip < off+int64(n) {
		p[o.flip-off] ^= 0x01
	}
	return n, err
}

func (o *flippedObject) Reader(_ context.Context, off, n int64) (io.ReadCloser, error) {
	return io.NopCloser(io.NewSectionReader(o, off, n)), nil
}

// TestMomentDamagedInTheStoreFailsItsRestore: the point of a moment,
// verified as it was written and not read whole again, is damaged in the
// store after it was written (a byte of its first stream's data reads
// changed): the restore's read of that stream for the server checks it
// against the CRC-32C of what was written and fails, and the live data set aside is
// put back as it was.
func TestMomentDamagedInTheStoreFailsItsRestore(t *testing.T) {
	fs := &fault.Store{}
	e := newEnv(t, fs.Wrap)
	at, _ := e.captureMoment()
	var damaged atomic.Bool
	fs.OnOpen(func(ctx context.Context, key string, next fault.OpenFunc) (store.Object, error) {
		o, err := next(ctx, key)
		if err != nil || !momentArchive(key) {
			return o, err
		}
		damaged.Store(true)
		// Inside the first stream's data: after its 512-byte tar header.
		return &flippedObject{Object: o, flip: 512 + 100}, nil
	})
	before := e.kept()
	_, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: module, Local: local, At: at.Format(time.RFC3339Nano), Caller: "test", Why: "a moment"})
	if !damaged.Load() {
		t.Fatalf("the moment's point was not read from the store (%v)", err)
	}
	if err == nil {
		t.Fatal("a moment's point damaged in the store after it was written was restored")
	}
	mustContain(t, err.Error(), "stream.arc.s2: entry does not match its checksum: read again for the restore, its CRC-32C is", "when it was verified: it changed in the store since", "the live data was put back from aside")
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("a failed restore did not put the live data back as it was:\n%s", d)
	}
}

// incrementalPointChanged takes the incremental point req(1,
// "incremental") with capture on, changes the kept data after it, turns
// capture off, and returns the kept data as it was at the point.
func (e *env) incrementalPointChanged() string {
	e.t.Helper()
	stop := e.captureOn()
	defer stop()
	want, taken := e.incrementalPoint()
	if !taken.Point.Incremental {
		e.t.Fatalf("snapshot-kept with capture on took a full point: %s", taken.Said)
	}
	e.batch(2)
	return want
}

// TestIncrementalPointVerifiedAsWritten: restore-kept of an incremental
// point whose moment's point is not made yet makes it, verified as it is
// written, and does not read it whole again: its evidence says so.
func TestIncrementalPointVerifiedAsWritten(t *testing.T) {
	e := newEnv(t)
	want := e.incrementalPointChanged()
	r := req(1, "incremental")
	r.Why = "back to the incremental point"
	rep, steps, err := e.restoreSteps(r)
	if err != nil {
		t.Fatalf("restore-kept of the incremental point: %v", err)
	}
	if !slices.Contains(steps, "moment") || slices.Contains(steps, "verify") {
		t.Errorf("the restore that made the incremental point's archive reported the steps %v: it must write it and not verify it again", steps)
	}
	pointChecked(t, rep, "verified as this restore wrote it")
	if got := asOfMoment(e.kept(), e.names.Reader); got != want {
		t.Errorf("the kept data differs from what it was at the point:\n got: %s\nwant: %s", got, want)
	}
}

// TestIncrementalPointDamagedSegment: verify-kept of an incremental point
// reads its segments whole: one whose archive was damaged in the store
// fails it, naming the segment.
func TestIncrementalPointDamagedSegment(t *testing.T) {
	e := newEnv(t)
	stop := e.captureOn()
	defer stop()
	e.captureReaches(time.Now())
	e.batch(1)
	e.captureReaches(time.Now())
	if _, err := e.k.SnapshotKept(e.ctx, req(1, "incremental")); err != nil {
		t.Fatal(err)
	}
	stop()
	archives, _ := filepath.Glob(filepath.Join(e.dir, "capture", module, local, "*", "s*", "bus.tar"))
	if len(archives) == 0 {
		t.Fatal("no segment archive in the store")
	}
	last := archives[len(archives)-1]
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(last, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.k.VerifyKept(e.ctx, req(1, "incremental"))
	if !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("verify-kept with a damaged segment: got %v, want damaged", err)
	}
	mustContain(t, err.Error(), "segment", "does not verify", "failed verification", "it must not be restored")
}
