package keeper_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

func TestSnapshotChangeRestore(t *testing.T) {
	e := newEnv(t)
	before := e.kept()
	eventsBefore := consumer(t, e.shared(), e.names.Events)
	kvBefore, err := sample.KV(e.ctx, e.js, e.names.Bus)
	if err != nil {
		t.Fatal(err)
	}
	objBefore, err := sample.Object(e.ctx, e.js, e.names.Bus, sample.BigObject)
	if err != nil {
		t.Fatal(err)
	}

	snap := e.snapshot(3, "9f2c1a7e")
	if got, want := len(snap.Point.Streams), 3; got != want {
		t.Fatalf("point streams: got %d, want %d", got, want)
	}
	mustContain(t, snap.Said, "billing/ledger f3-9f2c1a7e", "3 stream(s)")
	if fi, err := os.Stat(filepath.Join(snap.Dir, "bus.tar")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bus.tar: %v %v", fi, err)
	}

	e.change()
	changed := e.kept()
	if sample.Diff(before, changed) == "" {
		t.Fatal("Change changed nothing")
	}
	otherBefore := consumer(t, e.shared(), sample.OtherConsumer)

	r := req(3, "9f2c1a7e")
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	if rep.Aside == nil || rep.CatchUp != "ledger-migrate" {
		t.Fatalf("reply: aside %v catch-up %q", rep.Aside, rep.CatchUp)
	}
	mustContain(t, rep.Said, rep.Aside.ID, "3 stream(s) restored", "ledger-migrate")

	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("kept data after restore differs from the point:\n%s", d)
	}
	kvAfter, _ := sample.KV(e.ctx, e.js, e.names.Bus)
	if len(kvAfter) != len(kvBefore) {
		t.Errorf("KV keys: got %d, want %d", len(kvAfter), len(kvBefore))
	}
	for key, want := range kvBefore {
		if got := kvAfter[key]; got.Revision != want.Revision || got.Value != want.Value {
			t.Errorf("KV %s: got rev %d %q, want rev %d %q", key, got.Revision, got.Value, want.Revision, want.Value)
		}
	}
	objAfter, err := sample.Object(e.ctx, e.js, e.names.Bus, sample.BigObject)
	if err != nil || !bytes.Equal(objAfter, objBefore) {
		t.Errorf("big object not restored byte for byte (err %v, %d vs %d bytes)", err, len(objAfter), len(objBefore))
	}
	shared := e.shared()
	if got := consumer(t, shared, e.names.Events); got.Next != eventsBefore.Next || got.AckFloor != eventsBefore.AckFloor {
		t.Errorf("%s: next %d floor %d, want next %d floor %d", e.names.Events, got.Next, got.AckFloor,
			eventsBefore.Next, eventsBefore.AckFloor)
	}
	if got := consumer(t, shared, sample.OtherConsumer); !reflect.DeepEqual(got, otherBefore) {
		t.Errorf("another module's consumer changed: got %+v, want %+v", got, otherBefore)
	}

	// The aside holds the changed state exactly.
	if d := sample.Diff(changed, archiveStreams(t, rep.Dir)); d != "" {
		t.Errorf("aside differs from the live data it set aside:\n%s", d)
	}

	// list-kept shows both; discard-aside needs why, then removes it.
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module})
	if err != nil || len(list.Points) != 1 || len(list.Asides) != 1 {
		t.Fatalf("list-kept: %v %+v", err, list)
	}
	_, err = e.k.DiscardAside(e.ctx, keeper.Request{From: rep.Aside.ID, Caller: "ops"})
	if !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("discard without why: got %v, want bad request", err)
	}
	if _, err := os.Stat(rep.Dir); err != nil {
		t.Fatalf("aside gone after a refused discard: %v", err)
	}
	d, err := e.k.DiscardAside(e.ctx, keeper.Request{From: rep.Aside.ID, Caller: "ops", Why: "release verified"})
	if err != nil {
		t.Fatalf("discard-aside: %v", err)
	}
	mustContain(t, d.Said, rep.Aside.ID, "ops", "release verified")
	if _, err := os.Stat(rep.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("aside still there after discard: %v", err)
	}
	list, _ = e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if len(list.Asides) != 0 || len(list.Points) != 1 {
		t.Fatalf("after discard: %+v", list)
	}
	if _, err := e.k.DiscardAside(e.ctx, keeper.Request{From: rep.Aside.ID, Caller: "ops", Why: "again"}); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("second discard: got %v, want not found", err)
	}
}

// TestAsideOnly sets the live data aside with the very request a migration
// hook took its point with, AsideOnly flipped (form, fingerprint and
// catch-up still set), then puts that aside back.
func TestAsideOnly(t *testing.T) {
	e := newEnv(t)
	before := e.kept()
	r := req(3, "9f2c1a7e")
	r.CatchUp, r.AsideOnly, r.Why = "ledger-migrate-3-to-4", true, "make room"
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatalf("aside-only: %v", err)
	}
	mustContain(t, rep.Said, "nothing was restored", rep.Aside.ID)
	for _, s := range e.kept().Streams {
		if !s.Missing {
			t.Errorf("stream %s still on the bus after aside-only", s.Name)
		}
	}
	if d := sample.Diff(before, archiveStreams(t, rep.Dir)); d != "" {
		t.Errorf("aside differs from the live data:\n%s", d)
	}
	if _, err := e.k.RestoreKept(e.ctx, r); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("aside-only with nothing live: got %v, want not found", err)
	}
	back := req(0, "")
	back.From = "aside/" + rep.Aside.ID
	put, err := e.k.RestoreKept(e.ctx, back)
	if err != nil {
		t.Fatalf("putting the aside-only copy back: %v", err)
	}
	if d := diffKept(e, before); d != "" {
		t.Errorf("after putting the aside-only copy back the kept data differs:\n%s", d)
	}
	if put.Aside != nil {
		t.Errorf("nothing was live, yet the put-back set %s aside", put.Aside.ID)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "abc")
	e.change()
	before, shared := e.kept(), e.shared()
	entries := dirEntries(t, e.dir)
	r := req(1, "abc")
	r.DryRun = true
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	pl := rep.Plan
	if pl == nil || len(pl.SetAside) != 3 || len(pl.Remove) != 3 || len(pl.Restore) != 3 || len(pl.Reposition) != 1 {
		t.Fatalf("plan: %+v", pl)
	}
	if pl.Reposition[0].Consumer != e.names.Events || pl.AsideBytes == 0 || pl.RestoreBytes == 0 {
		t.Fatalf("plan: %+v", pl)
	}
	mustContain(t, rep.Said, "Dry run, nothing was changed", e.names.Events)
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("dry run changed the kept data:\n%s", d)
	}
	if d := sample.Diff(&sample.Snapshot{Streams: []sample.StreamDump{*shared}}, &sample.Snapshot{Streams: []sample.StreamDump{*e.shared()}}); d != "" {
		t.Errorf("dry run changed the shared stream:\n%s", d)
	}
	if got := dirEntries(t, e.dir); got != entries {
		t.Errorf("dry run changed the files:\n%s\nwant\n%s", got, entries)
	}
}

// TestPointTakenTwiceSetsTheEarlierAside: a point taken again at the same
// form and fingerprint (a retried deploy hook) replaces the earlier one
// whole, and the earlier one becomes a set-aside copy (reason replaced)
// that the reply names, list-kept shows and a restore can put back.
func TestPointTakenTwiceSetsTheEarlierAside(t *testing.T) {
	e := newEnv(t)
	original := e.kept()
	first := e.snapshot(2, "same")
	e.change()
	changed := e.kept()
	second := e.snapshot(2, "same")
	mustContain(t, second.Said, "replaces the earlier point", "set aside as")
	if first.Dir != second.Dir {
		t.Fatalf("dirs differ: %s %s", first.Dir, second.Dir)
	}
	if second.Point.Taken.Before(first.Point.Taken) {
		t.Fatal("second point is older")
	}
	if d := sample.Diff(changed, archiveStreams(t, second.Dir)); d != "" {
		t.Errorf("the point taken again does not hold the newer data:\n%s", d)
	}
	parent := filepath.Dir(second.Dir)
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 {
		t.Errorf("%s holds %d entries, want only the point", parent, len(ents))
	}
	a := second.Aside
	if a == nil || a.Reason != keeper.ReasonReplaced || a.Point != "points/billing/ledger/f2-same" {
		t.Fatalf("the reply names no replaced aside: %+v", a)
	}
	if d := sample.Diff(original, archiveStreams(t, filepath.Join(e.dir, a.Dir))); d != "" {
		t.Errorf("the replaced aside does not hold the earlier point's data:\n%s", d)
	}
	list, _ := e.k.ListKept(e.ctx, keeper.Request{})
	if len(list.Points) != 1 || len(list.Asides) != 1 || list.Asides[0].ID != a.ID || list.Asides[0].Reason != keeper.ReasonReplaced {
		t.Errorf("list: %d points and asides %+v, want 1 point and the replaced aside", len(list.Points), list.Asides)
	}
	// Put back: the earlier point's data is live again, and what was live
	// (the second point's data) is set aside in turn.
	r := req(0, "")
	r.From = "aside/" + a.ID
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatalf("putting the replaced aside back: %v", err)
	}
	mustContain(t, rep.Said, "set-aside copy "+a.ID)
	if d := diffKept(e, original); d != "" {
		t.Errorf("after putting the replaced aside back the kept data is not the earlier point:\n%s", d)
	}
	if rep.Aside == nil || rep.Aside.Point != a.Dir {
		t.Fatalf("the put-back set nothing aside: %+v", rep.Aside)
	}
	if d := sample.Diff(changed, archiveStreams(t, filepath.Join(e.dir, rep.Aside.Dir))); d != "" {
		t.Errorf("the put-back did not set the live data aside:\n%s", d)
	}
	// The undo undone: the aside of reason restore goes back too.
	if rep.Aside.Reason != keeper.ReasonRestore {
		t.Fatalf("the put-back's aside has reason %q, want restore", rep.Aside.Reason)
	}
	r.From = "aside/" + rep.Aside.ID
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatalf("putting the restore's aside back: %v", err)
	}
	if d := diffKept(e, changed); d != "" {
		t.Errorf("after putting the restore's aside back the kept data is not what was live:\n%s", d)
	}
}

func TestCorruptPointRefusedBusUntouched(t *testing.T) {
	e := newEnv(t)
	snap := e.snapshot(1, "fp")
	e.change()
	before := e.kept()
	path := filepath.Join(snap.Dir, "bus.tar")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 0x01
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.k.VerifyKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("verify-kept of a damaged point: got %v", err)
	}
	_, err = e.k.RestoreKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("restore-kept of a damaged point: got %v", err)
	}
	mustContain(t, err.Error(), "nothing was set aside or removed")
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("a refused restore changed the bus:\n%s", d)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dir, "aside")); len(ents) != 0 {
		t.Errorf("a refused restore left %d aside entries", len(ents))
	}
}

func TestVerifyAndNotFound(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "ok")
	rep, err := e.k.VerifyKept(e.ctx, req(1, "ok"))
	if err != nil || rep.Report == nil || len(rep.Report.Streams) != 3 {
		t.Fatalf("verify-kept: %v %+v", err, rep)
	}
	mustContain(t, rep.Said, "verifies")
	if _, err := e.k.VerifyKept(e.ctx, req(1, "missing")); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("verify of a missing point: %v", err)
	}
	if _, err := e.k.RestoreKept(e.ctx, req(9, "missing")); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("restore of a missing point: %v", err)
	}
	r := keeper.Request{Module: "nobody", Local: "nothing", Fingerprint: "x", Caller: "t"}
	_, err = e.k.SnapshotKept(e.ctx, r)
	if !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("snapshot of missing kept data: %v", err)
	}
	mustContain(t, err.Error(), "KV_nobody_nothing", "OBJ_nobody_nothing", "nobody_nothing")
}

func dirEntries(t *testing.T, dir string) string {
	t.Helper()
	var b bytes.Buffer
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p)
		if !fi.IsDir() {
			b.WriteString(" " + fi.ModTime().String())
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}

func TestRestoreWhenAPositionsStreamIsGone(t *testing.T) {
	e := newEnv(t)
	before := e.kept()
	e.snapshot(1, "fp")
	e.change()
	if err := e.js.DeleteStream(e.ctx, sample.SharedStream); err != nil {
		t.Fatal(err)
	}
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	mustContain(t, rep.Said, "cannot be set back because their stream no longer exists", e.names.Events)
	if d := sample.Diff(before, e.kept()); d != "" {
		t.Errorf("kept data after restore differs from the point:\n%s", d)
	}
}

// TestRestoreReportsBytesAndTotal: the restore step's progress counts the
// bytes it sends against a known total, and ends at that total.
func TestRestoreReportsBytesAndTotal(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	e.removeKept()
	var mu sync.Mutex
	var seen []keeper.Progress
	ctx := keeper.WithProgress(e.ctx, func(p keeper.Progress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	})
	if _, err := e.k.RestoreKept(ctx, req(1, "fp")); err != nil {
		t.Fatal(err)
	}
	var last *keeper.Progress
	for i := range seen {
		if seen[i].Step == "restore" {
			last = &seen[i]
		}
	}
	if last == nil || last.BytesTotal == 0 || last.Bytes != last.BytesTotal || last.StreamsTotal != 3 {
		t.Fatalf("the restore step's last progress is %+v, want its bytes at a known total of 3 streams", last)
	}
}
