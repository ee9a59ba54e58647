package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// diffOf is diff-kept of the point at form 3 before "9f2c1a7e" with limit
// and after, failing t on an error.
func diffOf(e *env, ctx context.Context, limit int, after string) *keeper.Reply {
	e.t.Helper()
	r := req(3, "9f2c1a7e")
	r.Why, r.Limit, r.After = "", limit, after
	rep, err := e.k.DiffKept(ctx, r)
	if err != nil {
		e.t.Fatalf("diff-kept: %v", err)
	}
	return rep
}

func changeOf(t *testing.T, rep *keeper.Reply, stream string) kept.StreamChange {
	t.Helper()
	for _, s := range rep.Streams {
		if s.Stream == stream {
			return s
		}
	}
	t.Fatalf("the diff names no stream %s: %+v", stream, rep.Streams)
	return kept.StreamChange{}
}

// A point of the sample, then a stream appended to and deleted from
// inside the point (not at the point's own gap, message 10) with its
// description changed; a KV bucket with a key added, one changed and one
// deleted; an object store with an object added, one replaced and one
// deleted; a consumer moved and one made. diff-kept says each, exactly,
// and whether each stream's point is a prefix of it and why not.
func TestDiffKeptSaysWhatChanged(t *testing.T) {
	e := newEnv(t)
	e.snapshot(3, "9f2c1a7e")
	ctx := e.ctx
	n := e.names

	s, err := e.js.Stream(ctx, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{3, 4} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := e.js.Publish(ctx, fmt.Sprintf("billing.ledger.orders.%d", i), []byte("after the point")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteMsg(ctx, 53); err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Description = "changed since the point"
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	kv, err := e.js.KeyValue(ctx, n.Bus)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "new.key", "added"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "config.size", "small"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "user.3"); err != nil {
		t.Fatal(err)
	}

	obs, err := e.js.ObjectStore(ctx, n.Bus)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, "new.txt", "a new object"); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, sample.SmallObject, "replaced"); err != nil {
		t.Fatal(err)
	}
	if err := obs.Delete(ctx, sample.BigObject); err != nil {
		t.Fatal(err)
	}

	reader, err := s.Consumer(ctx, n.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Ack(ctx, reader, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "billing-new", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}

	rep := diffOf(e, ctx, 0, "")
	if rep.Next != "" {
		t.Errorf("a diff this small has a next page: %q", rep.Next)
	}
	st := changeOf(t, rep, n.Stream)
	if st.Kind != "stream" || st.Then == nil || st.Then.LastSeq != 50 || st.Then.Messages != 49 || st.Now == nil || st.Now.LastSeq != 55 {
		t.Errorf("stream then/now: %+v", st)
	}
	if st.Appended != 4 || !slices.Equal(st.AppendedSeqs, []string{"51-52", "54-55"}) {
		t.Errorf("stream appended %d %v, want 4 [51-52 54-55]", st.Appended, st.AppendedSeqs)
	}
	if st.Removed != 2 || !slices.Equal(st.RemovedSeqs, []string{"3-4"}) {
		t.Errorf("stream removed %d %v, want 2 [3-4] (the point's own gap 10 is no removal)", st.Removed, st.RemovedSeqs)
	}
	if !slices.Equal(st.Config, []string{"description"}) {
		t.Errorf("stream config changed %v, want [description]", st.Config)
	}

	k := changeOf(t, rep, n.KVStream)
	if k.Kind != "kv" || k.Appended != 3 || k.Removed != 0 || len(k.Config) != 0 {
		t.Errorf("kv: %+v", k)
	}
	if k.Keys == nil || k.Keys.Added != 1 || k.Keys.Changed != 1 || k.Keys.Deleted != 1 ||
		!slices.Equal(k.Keys.Names, []string{"~config.size", "+new.key", "-user.3"}) {
		t.Errorf("kv keys: %+v", k.Keys)
	}

	o := changeOf(t, rep, n.ObjStrm)
	if o.Kind != "object-store" || o.Objects == nil || o.Objects.Added != 1 || o.Objects.Changed != 1 || o.Objects.Deleted != 1 ||
		!slices.Equal(o.Objects.Names, []string{"-" + sample.BigObject, "+new.txt", "~" + sample.SmallObject}) {
		t.Errorf("objects: %+v", o.Objects)
	}
	if o.Removed == 0 || o.Appended == 0 {
		t.Errorf("objects: the replaced and deleted objects' chunks are removed, the new ones appended: %+v", o)
	}

	byName := map[string]kept.ConsumerChange{}
	for _, c := range rep.Consumers {
		byName[c.Consumer] = c
	}
	if c := byName[n.Reader]; c.Then == 0 || c.Now != c.Then+5 || c.Gone || c.New {
		t.Errorf("consumer %s: %+v, want now 5 after then", n.Reader, c)
	}
	if c := byName[n.Events]; c.Then != c.Now || c.Then == 0 {
		t.Errorf("consumer %s did not move: %+v", n.Events, c)
	}
	if c := byName["billing-new"]; !c.New {
		t.Errorf("consumer billing-new is new since the point: %+v", c)
	}
	if _, ok := byName[sample.OtherConsumer]; ok {
		t.Errorf("another module's consumer is in the diff: %+v", rep.Consumers)
	}
	mustContain(t, rep.Said, "restore point billing/ledger f3-9f2c1a7e", "message(s) appended", "the config of 1 stream changed", "Compared in", "nothing was changed")

	ds, err := keeper.DiffStreams(ctx, e.k, req(3, "9f2c1a7e"), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		switch d.Change.Stream {
		case n.Stream:
			if d.Change.Removed != 2 {
				t.Errorf("stream: %d removed, want 2", d.Change.Removed)
			}
		case n.KVStream:
			if d.TailFirst == 0 || d.TailCount != 3 || d.TailLast != d.TailFirst+2 {
				t.Errorf("kv: want a tail of 3 after the point: %+v", d)
			}
		case n.ObjStrm:
			if d.Change.Removed == 0 {
				t.Errorf("objects: want the point's removed messages counted: %+v", d)
			}
		}
	}
}

// A stream only appended to shows its tail and nothing removed; one whose
// configuration changed names the field; one whose stream is gone has no
// live state and counts all its messages removed.
func TestDiffKeptTailConfigAndGone(t *testing.T) {
	e := newEnv(t)
	e.snapshot(3, "9f2c1a7e")
	ctx := e.ctx
	n := e.names
	if _, err := e.js.Publish(ctx, "billing.ledger.notes.1", []byte("tail")); err != nil {
		t.Fatal(err)
	}
	ds, err := keeper.DiffStreams(ctx, e.k, req(3, "9f2c1a7e"), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Change.Removed != 0 || (d.Change.Stream == n.Stream && (d.TailCount != 1 || d.Change.Appended != 1)) {
			t.Errorf("%s: only appended to (one message): %+v", d.Change.Stream, d)
		}
	}
	s, err := e.js.Stream(ctx, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.DenyDelete = true
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteStream(ctx, n.ObjStrm); err != nil {
		t.Fatal(err)
	}
	ds, err = keeper.DiffStreams(ctx, e.k, req(3, "9f2c1a7e"), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		switch d.Change.Stream {
		case n.Stream:
			if !slices.Contains(d.Change.Config, "deny_delete") || d.Change.Appended != 1 {
				t.Errorf("a stream that denies deletes since: %+v", d)
			}
		case n.ObjStrm:
			if d.Live || d.Change.Now != nil || d.Change.Removed != d.Change.Then.Messages {
				t.Errorf("a stream gone: %+v", d)
			}
		}
	}
}

// Paging: with a small limit, and with a small reply bound, asking again
// with after until next is empty gives every name and sequence exactly
// once, in order, as one page with a big limit does; the counts are whole
// on every page.
func TestDiffKeptPages(t *testing.T) {
	e := newEnv(t)
	e.snapshot(3, "9f2c1a7e")
	ctx := e.ctx
	n := e.names
	s, err := e.js.Stream(ctx, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		ack, err := e.js.Publish(ctx, fmt.Sprintf("billing.ledger.notes.%d", i%7), []byte("tail"))
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			if err := s.DeleteMsg(ctx, ack.Sequence); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, seq := range []uint64{2, 5, 7, 20, 21, 33} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := e.js.KeyValue(ctx, n.Bus)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := kv.PutString(ctx, fmt.Sprintf("page.%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	whole := diffOf(e, ctx, kept.MaxDiffLimit, "")
	if whole.Next != "" {
		t.Fatalf("the whole diff has a next page %q", whole.Next)
	}
	for _, c := range []struct {
		name  string
		ctx   context.Context
		limit int
	}{{"limit 4", ctx, 4}, {"limit 1", ctx, 1}, {"a reply bound of 400 bytes", keeper.WithReplyBound(ctx, 400), kept.MaxDiffLimit}} {
		got := map[string][]string{}
		after, pages := "", 0
		for ; pages < 200; pages++ {
			rep := diffOf(e, c.ctx, c.limit, after)
			for _, st := range rep.Streams {
				w := changeOf(t, whole, st.Stream)
				if st.Appended != w.Appended || st.Removed != w.Removed || (w.Keys != nil && (st.Keys == nil || st.Keys.Added != w.Keys.Added)) {
					t.Fatalf("%s: page %d counts %+v, the whole %+v", c.name, pages, st, w)
				}
				got[st.Stream+"/a"] = append(got[st.Stream+"/a"], st.AppendedSeqs...)
				got[st.Stream+"/r"] = append(got[st.Stream+"/r"], st.RemovedSeqs...)
				if st.Keys != nil {
					got[st.Stream+"/k"] = append(got[st.Stream+"/k"], st.Keys.Names...)
				}
				if st.Objects != nil {
					got[st.Stream+"/o"] = append(got[st.Stream+"/o"], st.Objects.Names...)
				}
			}
			if rep.Next == "" {
				break
			}
			if rep.Next == after {
				t.Fatalf("%s: page %d gave its own cursor %q again", c.name, pages, after)
			}
			after = rep.Next
		}
		if pages < 2 {
			t.Errorf("%s: %d page(s); the test wants more than two", c.name, pages+1)
		}
		for _, w := range whole.Streams {
			want := map[string][]string{w.Stream + "/a": w.AppendedSeqs, w.Stream + "/r": w.RemovedSeqs}
			if w.Keys != nil {
				want[w.Stream+"/k"] = w.Keys.Names
			}
			if w.Objects != nil {
				want[w.Stream+"/o"] = w.Objects.Names
			}
			for key, list := range want {
				if !slices.Equal(got[key], list) {
					t.Errorf("%s: %s paged %v, whole %v", c.name, key, got[key], list)
				}
			}
		}
	}
	if st := changeOf(t, whole, n.Stream); st.Appended != 40 || len(st.AppendedSeqs) != 21 || st.Removed != 6 {
		t.Errorf("the whole diff of the stream: %+v", st)
	}
	if k := changeOf(t, whole, n.KVStream); k.Keys == nil || k.Keys.Added != 30 || len(k.Keys.Names) != 30 {
		t.Errorf("the whole diff of the bucket: %+v", k.Keys)
	}
}

// A cursor that names no stream of the point or the live data is refused
// with a 400, and a limit over the bound too, before anything is read.
func TestDiffKeptRefusesBadPages(t *testing.T) {
	e := newEnv(t)
	e.snapshot(3, "9f2c1a7e")
	for _, c := range []struct{ after string }{{"NOPE/appended/3"}, {"x"}, {e.names.Stream + "/keys/%%%"}} {
		r := req(3, "9f2c1a7e")
		r.After = c.after
		if _, err := e.k.DiffKept(e.ctx, r); !errors.Is(err, keeper.ErrBadRequest) {
			t.Errorf("after %q: %v, want a bad request", c.after, err)
		}
	}
	r := req(3, "9f2c1a7e")
	r.Limit = kept.MaxDiffLimit + 1
	if _, err := e.k.DiffKept(e.ctx, r); !errors.Is(err, keeper.ErrBadRequest) {
		t.Errorf("limit over the bound: %v", err)
	}
	r = req(3, "no-such-point")
	if _, err := e.k.DiffKept(e.ctx, r); !errors.Is(err, keeper.ErrNotFound) {
		t.Errorf("no such point: %v", err)
	}
}

// A restore's dry run says, per stream of the point, what the live data
// changed since it, as diff-kept does.
func TestDryRunSaysTheDiff(t *testing.T) {
	e := newEnv(t)
	e.snapshot(3, "9f2c1a7e")
	for i := range 3 {
		if _, err := e.js.Publish(e.ctx, fmt.Sprintf("billing.ledger.notes.%d", i), []byte("tail")); err != nil {
			t.Fatal(err)
		}
	}
	r := req(3, "9f2c1a7e")
	r.DryRun = true
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	st := changeOf(t, rep, e.names.Stream)
	if st.Appended != 3 || !slices.Equal(st.AppendedSeqs, []string{"51-53"}) || st.Removed != 0 {
		t.Errorf("the dry run's stream: %+v", st)
	}
	if len(rep.Streams) != 3 {
		t.Errorf("the dry run names %d streams, want the point's 3", len(rep.Streams))
	}
	mustContain(t, rep.Said, "Since the point, the live data has 3 message(s) appended, 0 removed")
}

// A KV bucket of history 1 without gaps at the point: a key written again
// and one deleted since remove their earlier revisions, counted and named
// from the live details alone, and the keys are named from the tail and
// the removed revisions.
func TestDiffKeptBucketOfHistoryOne(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx
	if err := e.js.DeleteKeyValue(ctx, e.names.Bus); err != nil {
		t.Fatal(err)
	}
	kv, err := e.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: e.names.Bus, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := kv.PutString(ctx, k, "then"); err != nil {
			t.Fatal(err)
		}
	}
	e.snapshot(3, "9f2c1a7e")
	if _, err := kv.PutString(ctx, "b", "now"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "d", "new"); err != nil {
		t.Fatal(err)
	}
	k := changeOf(t, diffOf(e, ctx, 0, ""), e.names.KVStream)
	if k.Appended != 3 || !slices.Equal(k.AppendedSeqs, []string{"4-6"}) || k.Removed != 2 || !slices.Equal(k.RemovedSeqs, []string{"2-3"}) {
		t.Errorf("bucket: %+v", k)
	}
	if k.Keys == nil || !slices.Equal(k.Keys.Names, []string{"~b", "-c", "+d"}) || k.Keys.Added != 1 || k.Keys.Changed != 1 || k.Keys.Deleted != 1 {
		t.Errorf("keys: %+v", k.Keys)
	}
}
