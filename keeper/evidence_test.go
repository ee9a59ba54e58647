package keeper_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// counts are what the test reads of the kept data on its own: the KV
// bucket's subjects and the object store's objects (deleted ones counted,
// as their meta message stays).
type counts struct{ kvSubjects, objects int }

func (e *env) counts() counts {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, e.names.KVStream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		e.t.Fatal(err)
	}
	obs, err := e.js.ObjectStore(e.ctx, e.names.Bus)
	if err != nil {
		e.t.Fatal(err)
	}
	objs, err := obs.List(e.ctx, jetstream.ListObjectsShowDeleted())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		e.t.Fatal(err)
	}
	return counts{kvSubjects: len(info.State.Subjects), objects: len(objs)}
}

// checkOf is the report's check of that name.
func checkOf(t *testing.T, ev *keeper.Evidence, name string) keeper.Check {
	t.Helper()
	for _, c := range ev.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the evidence has no check %s: %+v", name, ev.Checks)
	return keeper.Check{}
}

func checkNames(ev *keeper.Evidence) []string {
	var out []string
	for _, c := range ev.Checks {
		out = append(out, c.Name)
	}
	return out
}

// storedEvidence reads the report in the store at dir and checks its files.
func storedEvidence(t *testing.T, dir string) *keeper.Evidence {
	t.Helper()
	for _, name := range []string{"evidence.json", "summary.md"} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
			t.Fatalf("%s in %s: %v %v", name, dir, fi, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := keeper.DecodeEvidence(data)
	if err != nil {
		t.Fatalf("evidence.json in %s does not decode: %v", dir, err)
	}
	summary, _ := os.ReadFile(filepath.Join(dir, "summary.md"))
	if string(summary) != ev.Summary() {
		t.Errorf("summary.md is not the report's summary:\n%s", summary)
	}
	return ev
}

func sameJSON(t *testing.T, a, b any) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("reports differ:\n%s\n%s", ja, jb)
	}
}

// TestEvidenceOfAGoodRestore restores a point over live data (a KV bucket,
// an object store and a stream, with consumers on the kept data's stream and
// one on a shared stream): every check is PASS with the figures behind it,
// and evidence.json and summary.md lie beside the aside, the very report the
// reply carries and show-evidence reads back.
func TestEvidenceOfAGoodRestore(t *testing.T) {
	e := newEnv(t)
	atPoint := e.counts()
	snap := e.snapshot(1, "fp")
	e.change()
	if e.counts() == atPoint {
		t.Fatal("the change changed no count")
	}
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	ev := rep.Evidence
	if ev == nil {
		t.Fatal("the reply carries no evidence")
	}
	if ev.Verdict != keeper.Pass || len(ev.Failed) != 0 {
		t.Fatalf("verdict %s: %s\n%s", ev.Verdict, ev.Said, ev.Summary())
	}
	want := []string{keeper.CheckPointVerified, keeper.CheckAsideVerified, keeper.CheckNoWritesAfter,
		keeper.CheckStreams, keeper.CheckKVKeys, keeper.CheckObjects, keeper.CheckConsumers}
	if got := checkNames(ev); !slices.Equal(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	for _, c := range ev.Checks {
		if c.Verdict != keeper.Pass || !strings.HasPrefix(c.Said, "PASS: ") {
			t.Errorf("check %s: %s %s", c.Name, c.Verdict, c.Said)
		}
	}
	if ev.Kind != keeper.KindReplace || ev.Aside != rep.Aside.ID || ev.Point != "points/billing/ledger/f1-fp" ||
		ev.Dir != "aside/"+rep.Aside.ID || ev.Recovered {
		t.Errorf("report of %+v", ev)
	}
	mustContain(t, rep.Said, "Evidence: PASS: all 7 checks passed", filepath.Join(rep.Dir, "evidence.json"))

	// The figures are the point's, the aside's and the bus's.
	pv := checkOf(t, ev, keeper.CheckPointVerified).Archive
	if pv == nil || pv.Size != snap.Point.ArchiveSize || pv.Sum != snap.Point.ArchiveSum || pv.Streams != 3 || pv.BytesChecked <= 0 ||
		pv.BytesChecked > pv.Size {
		t.Errorf("point-verified figures %+v, point %d bytes sum %s", pv, snap.Point.ArchiveSize, snap.Point.ArchiveSum)
	}
	av := checkOf(t, ev, keeper.CheckAsideVerified).Archive
	if av == nil || av.Size != rep.Aside.ArchiveSize || av.Sum != rep.Aside.ArchiveSum || av.Streams != 3 || av.BytesChecked <= 0 {
		t.Errorf("aside-verified figures %+v, aside %d bytes sum %s", av, rep.Aside.ArchiveSize, rep.Aside.ArchiveSum)
	}
	late := checkOf(t, ev, keeper.CheckNoWritesAfter).Streams
	if len(late) != 3 {
		t.Fatalf("no-late-writes lists %d streams", len(late))
	}
	for i, s := range rep.Aside.Streams {
		f := late[i]
		if f.Stream != s.Name || f.Want == nil || f.Got == nil || f.Want.LastSeq != s.LastSeq || f.Want.Messages != s.Messages ||
			*f.Got != *f.Want {
			t.Errorf("no-late-writes %s: %+v, aside holds %+v", s.Name, f, s)
		}
	}
	// The restore over live data keeps each stream's live last sequence
	// (the aside's), past the point's: the evidence wants that one.
	restored := checkOf(t, ev, keeper.CheckStreams).Streams
	for i, s := range snap.Point.Streams {
		f := restored[i]
		w := keeper.StreamCount{Messages: s.Messages, Bytes: s.Bytes, FirstSeq: s.FirstSeq, LastSeq: s.LastSeq}
		for _, a := range rep.Aside.Streams {
			if a.Name == s.Name {
				w.LastSeq = max(w.LastSeq, a.LastSeq)
			}
		}
		if f.Stream != s.Name || f.Want == nil || *f.Want != w || f.Got == nil || *f.Got != w {
			t.Errorf("streams-restored %s: %+v, point holds %+v", s.Name, f, s)
		}
	}
	kv := checkOf(t, ev, keeper.CheckKVKeys).Streams
	if len(kv) != 1 || kv[0].Count == nil || kv[0].Count.Want != uint64(atPoint.kvSubjects) || kv[0].Count.Got != uint64(atPoint.kvSubjects) {
		t.Errorf("kv-keys %+v, the bucket had %d keys at the point", kv, atPoint.kvSubjects)
	}
	obj := checkOf(t, ev, keeper.CheckObjects).Streams
	if len(obj) != 1 || obj[0].Count == nil || obj[0].Count.Objects == nil || *obj[0].Count.Objects != uint64(atPoint.objects) {
		t.Errorf("objects %+v, the store had %d objects at the point", obj, atPoint.objects)
	}
	if got := e.counts(); got != atPoint {
		t.Errorf("after the restore the counts are %+v, at the point %+v", got, atPoint)
	}
	cons := checkOf(t, ev, keeper.CheckConsumers).Consumers
	if len(cons) != len(snap.Point.Positions) {
		t.Fatalf("consumers-set lists %d consumers, the point recorded %d", len(cons), len(snap.Point.Positions))
	}
	for _, p := range snap.Point.Positions {
		i := slices.IndexFunc(cons, func(c keeper.ConsumerFigures) bool { return c.Stream == p.Stream && c.Consumer == p.Consumer })
		if i < 0 {
			t.Errorf("consumer %s on %s is not in the evidence", p.Consumer, p.Stream)
			continue
		}
		c := cons[i]
		if c.GotFloor == nil || *c.GotFloor != p.AckFloor || c.WantFloor != p.AckFloor || c.GotConfig == "" || c.GotConfig != c.WantConfig {
			t.Errorf("consumer %s on %s: %+v, recorded at %d", p.Consumer, p.Stream, c, p.AckFloor)
		}
	}
	var steps []string
	for _, s := range ev.Steps {
		steps = append(steps, s.Step)
		if s.Ended.Before(s.Started) || s.Started.Before(ev.Started) || s.Ended.After(ev.Ended) {
			t.Errorf("step %+v outside the restore's %s..%s", s, ev.Started, ev.Ended)
		}
	}
	for _, s := range []string{"verify", "aside", "remove", "restore", "position"} {
		if !slices.Contains(steps, s) {
			t.Errorf("steps %v lack %s", steps, s)
		}
	}

	// In the store beside the aside, and read back by show-evidence.
	sameJSON(t, storedEvidence(t, rep.Dir), ev)
	mustContain(t, ev.Summary(), "# Restore evidence: PASS", "| the point verified before anything was touched | PASS |",
		"billing-events on SHARED_EVENTS", "## Steps")
	for _, from := range []string{rep.Aside.ID, "aside/" + rep.Aside.ID, rep.Dir} {
		shown, err := e.k.ShowEvidence(e.ctx, keeper.Request{From: from})
		if err != nil {
			t.Fatalf("show-evidence %s: %v", from, err)
		}
		sameJSON(t, shown.Evidence, ev)
		mustContain(t, shown.Said, "billing/ledger", "PASS: all 7 checks passed")
	}
}

// TestEvidenceOfARestoreIntoAbsentData: with none of the kept data live,
// nothing is set aside, and the report lies beside the point's record; the
// point was checked as the restore read it.
func TestEvidenceOfARestoreIntoAbsentData(t *testing.T) {
	e := newEnv(t)
	snap := e.snapshot(2, "fp")
	e.removeKept()
	rep, err := e.k.RestoreKept(e.ctx, req(2, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	ev := rep.Evidence
	if ev == nil || ev.Verdict != keeper.Pass || ev.Kind != keeper.KindIntoAbsent || ev.Aside != "" || ev.Dir != "points/billing/ledger/f2-fp" {
		t.Fatalf("evidence %+v", ev)
	}
	want := []string{keeper.CheckPointVerified, keeper.CheckStreams, keeper.CheckKVKeys, keeper.CheckObjects, keeper.CheckConsumers}
	if got := checkNames(ev); !slices.Equal(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	pv := checkOf(t, ev, keeper.CheckPointVerified)
	if pv.Archive == nil || pv.Archive.Size != snap.Point.ArchiveSize || !strings.Contains(pv.Archive.How, "none of the kept data was live") {
		t.Errorf("point-verified %+v", pv)
	}
	sameJSON(t, storedEvidence(t, snap.Dir), ev)
	for _, r := range []keeper.Request{{From: "points/billing/ledger/f2-fp"}, {Module: module, Local: local, Form: 2, Fingerprint: "fp"}} {
		shown, err := e.k.ShowEvidence(e.ctx, r)
		if err != nil {
			t.Fatalf("show-evidence %+v: %v", r, err)
		}
		sameJSON(t, shown.Evidence, ev)
	}
	if _, err := e.k.ShowEvidence(e.ctx, keeper.Request{From: "billing.ledger.20200101T000000"}); !errors.Is(err, keeper.ErrNotFound) {
		t.Errorf("show-evidence of no aside: %v, want not found", err)
	}
	if _, err := e.k.ShowEvidence(e.ctx, keeper.Request{From: "../../etc"}); !errors.Is(err, keeper.ErrBadRequest) {
		t.Errorf("show-evidence of ../../etc: %v, want bad request", err)
	}
}

// stuckPositions puts in front of c's bus the real bus but for
// SetPosition, which says it moved the consumer and did not: a fault the
// restore's own steps cannot see.
func stuckPositions(c *keeper.Config) {
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnSetPosition(func(context.Context, keeper.Position, fault.SetPositionFunc) error { return nil })
}

// TestEvidenceFailsWhenAConsumerIsNotSetBack: a restore whose consumer on a
// stream the point does not carry could not be set back (the server refused,
// or the move silently did not happen) gives a FAIL verdict for that check
// and a failed reply that says so and carries the report. The restored data
// stays as it is, and so does the aside.
func TestEvidenceFailsWhenAConsumerIsNotSetBack(t *testing.T) {
	for _, how := range []string{"refused", "silent"} {
		t.Run(how, func(t *testing.T) {
			var f *faults
			e := newEnv(t, func(c *keeper.Config) {
				if how == "silent" {
					stuckPositions(c)
					return
				}
				f = &faults{op: "position", nth: 1, armed: true}
				f.wrapBus(c)
			})
			point := e.kept()
			e.snapshot(1, "fp")
			e.change()
			moved := consumer(t, e.shared(), e.names.Events)

			rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
			if err == nil || rep != nil {
				t.Fatalf("restore-kept gave %+v, %v; want a failure", rep, err)
			}
			var ee *keeper.EvidenceError
			if !errors.As(err, &ee) || !errors.Is(err, keeper.ErrFailed) || keeper.KindOf(err) != keeper.ErrFailed {
				t.Fatalf("got %T %v, want an evidence failure", err, err)
			}
			ev := ee.Evidence
			if ev == nil || ev.Verdict != keeper.Fail || !slices.Equal(ev.Failed, []string{keeper.CheckConsumers}) {
				t.Fatalf("evidence %+v", ev)
			}
			mustContain(t, err.Error(), "FAIL", keeper.CheckConsumers, "set aside as "+ev.Aside, "evidence.json")
			if how == "silent" {
				mustContain(t, err.Error(), "restored data is left as it is", "not undone")
			}
			c := checkOf(t, ev, keeper.CheckConsumers)
			i := slices.IndexFunc(c.Consumers, func(c keeper.ConsumerFigures) bool { return c.Consumer == e.names.Events })
			if i < 0 {
				t.Fatalf("consumers-set lacks %s: %+v", e.names.Events, c)
			}
			bad := c.Consumers[i]
			if bad.Verdict != keeper.Fail || bad.GotFloor == nil || *bad.GotFloor != moved.AckFloor || bad.WantFloor == moved.AckFloor {
				t.Errorf("%s: %+v; it stood at %d before the restore", e.names.Events, bad, moved.AckFloor)
			}
			for _, other := range ev.Checks {
				if other.Name != keeper.CheckConsumers && other.Verdict != keeper.Pass {
					t.Errorf("check %s: %s", other.Name, other.Said)
				}
			}
			// The restore happened: the kept data is the point's, the
			// aside and its report are in the store, no journal is left.
			if d := sample.Diff(point, e.kept()); d != "" {
				t.Errorf("the kept data is not the point's:\n%s", d)
			}
			dir := filepath.Join(e.dir, "aside", ev.Aside)
			if _, err := os.Stat(filepath.Join(dir, "aside.json")); err != nil {
				t.Errorf("the aside is gone: %v", err)
			}
			sameJSON(t, storedEvidence(t, dir), ev)
			if keys, _ := e.bus.Keys(e.ctx, "journal."); len(keys) != 0 {
				t.Errorf("journal left: %v", keys)
			}
			shown, err := e.k.ShowEvidence(e.ctx, keeper.Request{From: ev.Aside})
			if err != nil || shown.Evidence.Verdict != keeper.Fail {
				t.Errorf("show-evidence: %+v %v", shown, err)
			}
		})
	}
}

// TestEvidenceOfARecoveredRestore: a keeper that stopped after restoring one
// stream leaves its evidence so far in the journal; the keeper that finishes
// the restore writes the whole report, marked recovered.
func TestEvidenceOfARecoveredRestore(t *testing.T) {
	n := sample.NamesOf(module, local)
	e, stop := crashEnv(t, "restored:"+n.KVStream)
	e.snapshot(1, "fp")
	e.change()
	stop()
	_, said := recoverOnce(t, e)
	mustContain(t, said, "was completed", "Evidence: PASS")
	// The restore's own aside holds the report; one recovery made of a
	// stream the stopped keeper had begun (restores run two at a time)
	// holds none.
	reports, err := filepath.Glob(filepath.Join(e.dir, "aside", "*", "evidence.json"))
	if err != nil || len(reports) != 1 {
		t.Fatalf("evidence reports: %v %v", reports, err)
	}
	id := filepath.Base(filepath.Dir(reports[0]))
	ev := storedEvidence(t, filepath.Dir(reports[0]))
	if reason := asideReasonOf(t, filepath.Dir(reports[0])); reason != keeper.ReasonRestore {
		t.Errorf("the report lies beside aside %s of reason %s", id, reason)
	}
	if ev.Verdict != keeper.Pass || !ev.Recovered || ev.Aside != id {
		t.Fatalf("evidence %+v\n%s", ev, ev.Summary())
	}
	// What the first keeper checked before it stopped is in it.
	if got := checkNames(ev); !slices.Contains(got, keeper.CheckPointVerified) || !slices.Contains(got, keeper.CheckNoWritesAfter) ||
		len(checkOf(t, ev, keeper.CheckNoWritesAfter).Streams) != 3 {
		t.Errorf("checks %v", got)
	}
}

// TestEvidenceOfAnAsideOnly: an aside-only request restores nothing, so its
// report holds the aside's checks only, beside the aside.
func TestEvidenceOfAnAsideOnly(t *testing.T) {
	e := newEnv(t)
	r := req(1, "fp")
	r.AsideOnly = true
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatalf("aside-only: %v", err)
	}
	ev := rep.Evidence
	if ev == nil || ev.Verdict != keeper.Pass || ev.Kind != keeper.KindAsideOnly || ev.Point != "" {
		t.Fatalf("evidence %+v", ev)
	}
	if got, want := checkNames(ev), []string{keeper.CheckAsideVerified, keeper.CheckNoWritesAfter}; !slices.Equal(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	if n := len(checkOf(t, ev, keeper.CheckNoWritesAfter).Streams); n != 3 {
		t.Errorf("no-late-writes lists %d streams, want 3", n)
	}
	sameJSON(t, storedEvidence(t, rep.Dir), ev)
}

// TestEvidenceOfAnAsidePutBackIntoAbsentData: the aside keeps the report of
// the restore that made it; the report of putting it back is in the reply,
// which says why it is not in the store.
func TestEvidenceOfAnAsidePutBackIntoAbsentData(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	first, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatal(err)
	}
	e.removeKept()
	r := req(0, "")
	r.From = "aside/" + first.Aside.ID
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatalf("putting the aside back: %v", err)
	}
	if rep.Evidence == nil || rep.Evidence.Verdict != keeper.Pass || rep.Evidence.Kind != keeper.KindIntoAbsent {
		t.Fatalf("evidence %+v", rep.Evidence)
	}
	mustContain(t, rep.Said, "Evidence: PASS", "keeps the report of the restore that made it", "only in this reply")
	sameJSON(t, storedEvidence(t, first.Dir), first.Evidence)
}

// silentAfterRestore puts in front of c's bus the real bus but for the
// info of stream once a restore has begun: it is never answered, as a
// stream whose servers are away.
func silentAfterRestore(c *keeper.Config, stream string) {
	var restored atomic.Bool
	f := &fault.Bus{}
	f.Wrap(c)
	f.OnRestore(func(ctx context.Context, s string, data, meta io.Reader, next fault.RestoreFunc) error {
		restored.Store(true)
		return next(ctx, s, data, meta)
	})
	f.OnStream(func(ctx context.Context, name string, next fault.StreamFunc) (*keeper.StreamInfo, error) {
		if name == stream && restored.Load() {
			<-ctx.Done()
			return nil, fmt.Errorf("no answer from stream %s: %w", name, ctx.Err())
		}
		return next(ctx, name)
	})
}

// TestEvidenceOfAStreamThatDoesNotAnswer: a restored stream that answers no
// read does not hold the restore: the check waits its bound, says the stream
// was not checked and why, and the restore is reported as failed, the aside
// kept.
func TestEvidenceOfAStreamThatDoesNotAnswer(t *testing.T) {
	n := sample.NamesOf(module, local)
	e := newEnv(t, func(c *keeper.Config) { silentAfterRestore(c, n.KVStream) })
	keeper.SetEvidenceWait(e.k, 300*time.Millisecond)
	e.snapshot(1, "fp")
	e.change()
	_, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	var ee *keeper.EvidenceError
	if !errors.As(err, &ee) {
		t.Fatalf("restore-kept with a restored stream that does not answer: %v; want an evidence failure", err)
	}
	if !slices.Contains(ee.Evidence.Failed, keeper.CheckStreams) {
		t.Fatalf("failed checks %v, want %s among them", ee.Evidence.Failed, keeper.CheckStreams)
	}
	c := checkOf(t, ee.Evidence, keeper.CheckStreams)
	i := slices.IndexFunc(c.Streams, func(f keeper.StreamFigures) bool { return f.Stream == n.KVStream })
	if i < 0 {
		t.Fatalf("%s lacks %s: %+v", keeper.CheckStreams, n.KVStream, c)
	}
	mustContain(t, c.Streams[i].Note, "not checked: it could not be read after the restore", "deadline exceeded")
	mustContain(t, err.Error(), "set aside as "+ee.Evidence.Aside)
}
