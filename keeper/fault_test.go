package keeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

var errInjected = errors.New("injected fault")

// faults fails the n-th call of one operation of the real bus, index and
// acts, through the hooks of a fault.Bus in front of them. It is for
// injecting faults only; everything else is the real bus.
type faults struct {
	fault.Bus

	mu    sync.Mutex
	op    string // "snapshot", "restore", "delete", "position", "put:<prefix>", "act:<outcome>"
	nth   int    // fail the nth call (1-based)
	upto  int    // and every call up to this one, if larger
	calls map[string]int
	armed bool

	// beforeRestore, when set, runs before each restore reaches the bus.
	beforeRestore func(stream string)
}

func (f *faults) fail(op string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return false
	}
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	n := f.calls[op]
	return op == f.op && (n == f.nth || (n > f.nth && n <= f.upto))
}

// hookBus sets the hooks that fail the bus's calls.
func (f *faults) hookBus() {
	f.OnSnapshot(func(ctx context.Context, s string, data, meta io.WriteCloser, next fault.SnapshotFunc) error {
		if f.fail("snapshot") {
			io.WriteString(data, "partial bytes")
			data.Close()
			meta.Close()
			return errInjected
		}
		return next(ctx, s, data, meta)
	})
	f.OnRestore(func(ctx context.Context, s string, data, meta io.Reader, next fault.RestoreFunc) error {
		if f.beforeRestore != nil {
			f.beforeRestore(s)
		}
		if f.fail("restore") {
			// A real half-restore: the server gets only part of the data.
			if err := next(ctx, s, io.LimitReader(data, 2000), meta); err != nil {
				return errors.Join(errInjected, err)
			}
			return errInjected
		}
		return next(ctx, s, data, meta)
	})
	f.OnDeleteStream(func(ctx context.Context, s string, next fault.DeleteStreamFunc) error {
		if f.fail("delete") {
			return errInjected
		}
		if f.fail("delete-lost") {
			// The server deletes the stream but its reply is lost.
			next(ctx, s)
			return errInjected
		}
		return next(ctx, s)
	})
	f.OnSetPosition(func(ctx context.Context, p keeper.Position, next fault.SetPositionFunc) error {
		if f.fail("position") {
			return errInjected
		}
		return next(ctx, p)
	})
}

// hookIndexActs sets the hooks that fail the index's puts and the acts.
func (f *faults) hookIndexActs() {
	f.OnPut(func(ctx context.Context, k string, v []byte, next fault.PutFunc) error {
		if f.fail("put:" + strings.SplitN(k, ".", 2)[0]) {
			return errInjected
		}
		return next(ctx, k, v)
	})
	f.OnRecord(func(ctx context.Context, a keeper.Act, next fault.RecordFunc) error {
		if f.fail("act:" + a.Verb + ":" + a.Outcome) {
			return errInjected
		}
		return next(ctx, a)
	})
}

func faultEnv(t *testing.T) (*env, *faults) {
	f := &faults{}
	return newEnv(t, f.wrap), f
}

// during runs verb with the fault armed: the nth call of op fails (and
// every one up to upto, if larger).
func (f *faults) during(op string, nth, upto int, verb func() (*keeper.Reply, error)) (*keeper.Reply, error) {
	f.mu.Lock()
	f.op, f.nth, f.upto, f.armed = op, nth, upto, true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.armed = false
		f.mu.Unlock()
	}()
	return verb()
}

// wrap puts f in front of the config's bus, index and acts.
func (f *faults) wrap(c *keeper.Config) {
	f.WrapAll(c)
	f.hookBus()
	f.hookIndexActs()
}

// wrapBus puts f in front of the config's bus alone.
func (f *faults) wrapBus(c *keeper.Config) {
	f.Wrap(c)
	f.hookBus()
}

// TestRestoreFaults fails each step of restore-kept in turn. After each, the
// kept data is on the bus either as it was or as the point, the aside (if
// any) is complete, and the error says what did and did not happen.
func TestRestoreFaults(t *testing.T) {
	cases := []restoreFault{
		{"snapshot", 1, "live", []string{"setting the live data aside failed", "nothing was removed"}},
		{"snapshot", 3, "live", []string{"setting the live data aside failed", "nothing was removed"}},
		{"put:aside", 1, "live", []string{"could not be recorded", "nothing was removed"}},
		{"delete", 1, "live", []string{"removing the live streams failed", "no live stream had been removed"}},
		{"delete", 2, "live", []string{"removing the live streams failed", "put back from aside"}},
		{"delete-lost", 1, "live", []string{"removing the live streams failed", "put back from aside"}},
		{"delete-lost", 3, "live", []string{"removing the live streams failed", "put back from aside"}},
		{"restore", 1, "live", []string{"half-restored", "put back from aside"}},
		{"restore", 2, "live", []string{"half-restored", "put back from aside"}},
		{"restore", 3, "live", []string{"half-restored", "put back from aside"}},
		{"position", 1, "point", []string{"restored every stream", "set aside as"}},
	}
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) {
			e, f := faultEnv(t)
			c.run(t, e, f)
		})
	}
}

// restoreFault is one fault of restore-kept: the nth call of op fails.
type restoreFault struct {
	op      string
	nth     int
	outcome string // "live": the bus holds the live data as it was; "point": the point's data
	says    []string
}

func (c restoreFault) name() string { return c.op + "#" + string(rune('0'+c.nth)) }

// run takes a point, changes the data, and restores the point with the
// fault armed: the restore fails saying c.says, the kept data is on the
// bus as c.outcome, and every aside is complete and holds the live data.
func (c restoreFault) run(t *testing.T, e *env, f *faults) {
	t.Helper()
	point := e.kept()
	e.snapshot(1, "fp")
	e.change()
	live := e.kept()

	_, err := f.during(c.op, c.nth, 0, func() (*keeper.Reply, error) { return e.k.RestoreKept(e.ctx, req(1, "fp")) })
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("got %v, want a failure", err)
	}
	mustContain(t, err.Error(), c.says...)

	want := live
	if c.outcome == "point" {
		want = point
	}
	if d := sample.Diff(want, e.kept()); d != "" {
		t.Errorf("after a fault at %s #%d the kept data is not %s:\n%s\nerror: %v", c.op, c.nth, c.outcome, d, err)
	}
	checkAsides(t, e, live)
}

// checkAsides: every aside directory is complete and holds the live data,
// and no partial directory is left.
func checkAsides(t *testing.T, e *env, live *sample.Snapshot) {
	t.Helper()
	checkAsidesOf(t, e, live, nil)
}

// checkAsidesOf is checkAsides where recovery may also have set aside what
// a stopped restore had restored (streams restored at once finish apart):
// each stream of a recovery aside is the live one or, if point is given,
// the point's, or a part of the point's: a restore stopped while it sent a
// stream leaves the server holding what it had received (facts.md), and
// recovery sets that aside as it stands.
func checkAsidesOf(t *testing.T, e *env, live, point *sample.Snapshot) {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(e.dir, "aside"))
	for _, ent := range ents {
		if strings.HasSuffix(ent.Name(), ".partial") {
			t.Errorf("partial aside left: %s", ent.Name())
			continue
		}
		dir := filepath.Join(e.dir, "aside", ent.Name())
		if _, err := busarchive.VerifyFile(e.ctx, filepath.Join(dir, "bus.tar")); err != nil {
			t.Errorf("aside %s does not verify: %v", ent.Name(), err)
			continue
		}
		got := archiveStreams(t, dir)
		if point != nil && asideReasonOf(t, dir) == keeper.ReasonRecovery {
			for _, sd := range got.Streams {
				one := &sample.Snapshot{Streams: []sample.StreamDump{sd}}
				if sample.Diff(one, streamOf(live, sd.Name)) == "" || sample.Diff(one, streamOf(point, sd.Name)) == "" {
					continue
				}
				if !partOf(sd, point) {
					t.Errorf("recovery aside %s holds stream %s as neither the live data nor the point had it", ent.Name(), sd.Name)
				} else {
					t.Logf("recovery aside %s holds stream %s half restored: %d message(s), each the point's", ent.Name(), sd.Name, len(sd.Messages))
				}
			}
			continue
		}
		if d := sample.Diff(live, got); d != "" {
			t.Errorf("aside %s differs from the live data:\n%s", ent.Name(), d)
		}
	}
}

// partOf reports whether sd holds only messages its stream in point holds,
// each the same at the same sequence: a stream half restored from point.
func partOf(sd sample.StreamDump, point *sample.Snapshot) bool {
	byseq := map[uint64]sample.Message{}
	for _, ps := range point.Streams {
		if ps.Name == sd.Name {
			for _, m := range ps.Messages {
				byseq[m.Seq] = m
			}
		}
	}
	for _, m := range sd.Messages {
		pm, ok := byseq[m.Seq]
		if !ok || pm.Subject != m.Subject || pm.SHA256 != m.SHA256 || pm.Size != m.Size {
			return false
		}
	}
	return len(byseq) > 0
}

func streamOf(s *sample.Snapshot, name string) *sample.Snapshot {
	for _, sd := range s.Streams {
		if sd.Name == name {
			return &sample.Snapshot{Streams: []sample.StreamDump{sd}}
		}
	}
	return &sample.Snapshot{}
}

func asideReasonOf(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "aside.json"))
	if err != nil {
		t.Fatal(err)
	}
	var a keeper.Aside
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	return a.Reason
}

func TestSnapshotFaultsLeaveNoPoint(t *testing.T) {
	for _, op := range []string{"snapshot", "put:point"} {
		t.Run(op, func(t *testing.T) {
			e, f := faultEnv(t)
			f.mu.Lock()
			f.op, f.nth, f.armed = op, 1, true
			f.mu.Unlock()
			_, err := e.k.SnapshotKept(e.ctx, req(1, "fp"))
			if !errors.Is(err, keeper.ErrFailed) {
				t.Fatalf("got %v, want a failure", err)
			}
			dir := filepath.Join(e.dir, "points", module, local)
			ents, _ := os.ReadDir(dir)
			switch op {
			case "snapshot":
				mustContain(t, err.Error(), "was not taken")
				if len(ents) != 0 {
					t.Errorf("a failed snapshot left %v", ents)
				}
			case "put:point":
				// The point is complete on disk; only its index record is missing.
				mustContain(t, err.Error(), "is complete in", "could not be recorded")
				if len(ents) != 1 || strings.HasSuffix(ents[0].Name(), ".partial") {
					t.Errorf("entries: %v", ents)
				}
			}
		})
	}
}

func TestDiscardNeedsRecordedHandAct(t *testing.T) {
	e, f := faultEnv(t)
	rep, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: module, Local: local, AsideOnly: true, Caller: "t", Why: "w"})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.op, f.nth, f.armed = "act:discard-aside:intent", 1, true
	f.mu.Unlock()
	_, err = e.k.DiscardAside(e.ctx, keeper.Request{From: rep.Aside.ID, Caller: "ops", Why: "done"})
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("got %v, want failure", err)
	}
	mustContain(t, err.Error(), "could not be recorded", "nothing was removed")
	if _, err := busarchive.VerifyFile(e.ctx, filepath.Join(rep.Dir, "bus.tar")); err != nil {
		t.Fatalf("the aside was touched: %v", err)
	}
}

// TestPutBackFailsJournalStays: the restore fails and so does putting the
// aside back. The journal stays, the kept data is refused to other verbs,
// and recovery finishes the restore.
func TestPutBackFailsJournalStays(t *testing.T) {
	e, f := faultEnv(t)
	point := e.kept()
	e.snapshot(1, "fp")
	e.change()
	live := e.kept()
	// Every restore fails: the streams restored at once, and the put-back.
	_, err := f.during("restore", 1, 100, func() (*keeper.Reply, error) { return e.k.RestoreKept(e.ctx, req(1, "fp")) })
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("got %v, want failure", err)
	}
	mustContain(t, err.Error(), "failed too", "the restore journal stays")
	_, err = e.k.RestoreKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("restore during an unfinished restore: got %v, want conflict", err)
	}
	mustContain(t, err.Error(), "unfinished restore")
	if _, err := e.k.SnapshotKept(e.ctx, req(2, "x")); !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("snapshot during an unfinished restore: got %v, want conflict", err)
	}
	said, err := e.k.Recover(e.ctx)
	if err != nil || len(said.Said()) != 1 {
		t.Fatalf("recover: %v %q", err, said)
	}
	if d := sample.Diff(point, e.kept()); d != "" {
		t.Errorf("after recovery the kept data is not the point:\n%s", d)
	}
	checkAsides(t, e, live)
}

// TestRestoreRefusedOverARacingStreamLeavesIt: a restore into absent kept data
// finds that someone created one of its streams after the plan was made. The
// server refuses to restore over it, and the keeper must not remove it as if
// it were half of its own restore.
func TestRestoreRefusedOverARacingStreamLeavesIt(t *testing.T) {
	e, f := faultEnv(t)
	e.snapshot(1, "fp")
	e.removeKept()
	var once sync.Once
	f.beforeRestore = func(stream string) {
		if stream != e.names.KVStream {
			return
		}
		once.Do(func() {
			kv, err := e.js.CreateKeyValue(e.ctx, jetstream.KeyValueConfig{Bucket: e.names.Bus})
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := kv.PutString(e.ctx, "theirs", "keep me"); err != nil {
				t.Error(err)
			}
		})
	}
	_, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("restore-kept over a racing stream: got %v, want a conflict", err)
	}
	mustContain(t, err.Error(), "already exists", "nothing live was touched")
	if strings.Contains(err.Error(), "half-restored stream(s) "+e.names.KVStream) {
		t.Errorf("the error counts the racing stream as half-restored: %v", err)
	}
	kv, err := e.js.KeyValue(e.ctx, e.names.Bus)
	if err != nil {
		t.Fatalf("the racing bucket is gone: %v", err)
	}
	got, err := kv.Get(e.ctx, "theirs")
	if err != nil || string(got.Value()) != "keep me" {
		t.Fatalf("the racing bucket's key: %v %v", got, err)
	}
}
