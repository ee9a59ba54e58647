package keeper_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
)

const (
	logicalModule = "shop"
	kvLocal       = "cart"  // KV bucket shop_cart
	objLocal      = "files" // object store shop_files
)

// kvBed is a test bed whose kept data shop/cart is a KV bucket of n keys.
func kvBed(t *testing.T, n int, opts ...func(*keeper.Config)) (*testbed.Bed, jetstream.KeyValue) {
	t.Helper()
	b := testbed.New(t, testbed.WithConfig(opts...), testbed.WithData(func(ctx context.Context, js jetstream.JetStream) error {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: logicalModule + "_" + kvLocal, History: 1})
		if err != nil {
			return err
		}
		for i := range n {
			if _, err := kv.PutString(ctx, kvKey(i), fmt.Sprintf("value %d at the point", i)); err != nil {
				return err
			}
		}
		return nil
	}))
	kv, err := b.JS.KeyValue(b.Ctx, logicalModule+"_"+kvLocal)
	if err != nil {
		t.Fatal(err)
	}
	return b, kv
}

func kvKey(i int) string { return fmt.Sprintf("key.%04d", i) }

func pointReq(local string) keeper.Request {
	return keeper.Request{Module: logicalModule, Local: local, Form: 1, Fingerprint: "fp", Caller: "test", Why: "testing"}
}

func logicalReq(local string) keeper.Request {
	r := pointReq(local)
	r.Method = "logical"
	return r
}

// kvValues is every key's value in kv ("" with ok false: no value), and its
// revision.
type kvValue struct {
	value string
	ok    bool
	rev   uint64
}

func kvValues(t *testing.T, ctx context.Context, kv jetstream.KeyValue, keys []string) map[string]kvValue {
	t.Helper()
	out := map[string]kvValue{}
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			out[key] = kvValue{}
		case err != nil:
			t.Fatalf("get %s: %v", key, err)
		default:
			out[key] = kvValue{value: string(e.Value()), ok: true, rev: e.Revision()}
		}
	}
	return out
}

// changeKV rewrites 50 keys, adds 10 and deletes 10 after the point, and
// returns every key the bucket has known.
func changeKV(t *testing.T, ctx context.Context, kv jetstream.KeyValue, n int) []string {
	t.Helper()
	for i := 0; i < 50; i++ {
		if _, err := kv.PutString(ctx, kvKey(i*7), "rewritten after the point"); err != nil {
			t.Fatal(err)
		}
	}
	for i := n; i < n+10; i++ {
		if _, err := kv.PutString(ctx, kvKey(i), "added after the point"); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		if err := kv.Delete(ctx, kvKey(i*7+3)); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]string, 0, n+10)
	for i := range n + 10 {
		keys = append(keys, kvKey(i))
	}
	return keys
}

// sameValues reports where got and want differ, by value and presence.
func sameValues(got, want map[string]kvValue) string {
	var diffs []string
	for key, w := range want {
		if g := got[key]; g.ok != w.ok || g.value != w.value {
			diffs = append(diffs, fmt.Sprintf("%s: %q (%v), want %q (%v)", key, g.value, g.ok, w.value, w.ok))
		}
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("… %d in all", len(diffs)))
	}
	return strings.Join(diffs, "\n")
}

// TestLogicalRestoreKV rolls back a KV bucket of 1,000 keys, 50 of them
// rewritten, 10 added and 10 deleted after the point, by the logical
// method: every key then holds the point's value, the revisions of those
// it wrote only grew, a watcher started before the rollback sees every key
// rolled back, the reply and evidence say logical and why; putting the
// logical aside back returns the live values.
func TestLogicalRestoreKV(t *testing.T) {
	const n = 1000
	b, kv := kvBed(t, n)
	ctx := b.Ctx
	if _, err := b.Keeper.SnapshotKept(ctx, pointReq(kvLocal)); err != nil {
		t.Fatal(err)
	}
	keys := changeKV(t, ctx, kv, n)
	point := map[string]kvValue{}
	for i := range n + 10 {
		point[kvKey(i)] = kvValue{}
		if i < n {
			point[kvKey(i)] = kvValue{value: fmt.Sprintf("value %d at the point", i), ok: true}
		}
	}
	live := kvValues(t, ctx, kv, keys)
	si, err := b.JS.Stream(ctx, "KV_"+logicalModule+"_"+kvLocal)
	if err != nil {
		t.Fatal(err)
	}
	lastBefore := si.CachedInfo().State.LastSeq

	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	rep, err := b.Keeper.RestoreKept(ctx, logicalReq(kvLocal))
	if err != nil {
		t.Fatalf("logical restore: %v", err)
	}
	got := kvValues(t, ctx, kv, keys)
	if d := sameValues(got, point); d != "" {
		t.Errorf("after the logical restore the keys are not the point's:\n%s", d)
	}
	rolled := map[string]bool{}
	for _, key := range keys {
		if l, p := live[key], point[key]; l.ok != p.ok || l.value != p.value {
			rolled[key] = true
		}
		if g, l := got[key], live[key]; g.ok && l.ok && g.rev < l.rev {
			t.Errorf("%s: revision %d after the restore, %d before: revisions went back", key, g.rev, l.rev)
		}
	}
	if len(rolled) != 70 {
		t.Fatalf("%d keys differ from the point, want 70", len(rolled))
	}
	for key := range rolled {
		if g := got[key]; g.ok && g.rev <= lastBefore {
			t.Errorf("%s: revision %d, not a new one (the stream's last was %d)", key, g.rev, lastBefore)
		}
	}
	seen := watchUntil(t, w, rolled)
	for key := range rolled {
		if !seen[key] {
			t.Errorf("the watcher did not see %s rolled back", key)
		}
	}
	if len(rep.Streams) != 1 || rep.Streams[0].Method != "logical" || !strings.Contains(rep.Streams[0].Why, "70 of 1,010 keys differ") {
		t.Errorf("reply streams: %+v, want one logical stream with 70 of 1,010 keys differing", rep.Streams)
	}
	if k := rep.Streams[0].Keys; k == nil || k.Added != 10 || k.Deleted != 10 || k.Changed != 50 {
		t.Errorf("reply keys: %+v, want 10 added, 10 deleted, 50 changed", k)
	}
	mustContain(t, rep.Said, "logically", "new revision", "nothing was removed", "set aside as")
	if rep.Evidence == nil || rep.Evidence.Verdict != keeper.Pass || rep.Evidence.Find(keeper.CheckLogical) == nil {
		t.Fatalf("evidence: %+v", rep.Evidence)
	}
	if rep.Aside == nil || len(rep.Aside.Streams) != 1 || !rep.Aside.Streams[0].Logical {
		t.Fatalf("the aside is not marked logical: %+v", rep.Aside)
	}

	// Put back: the live values as they were before the rollback.
	back := logicalReq(kvLocal)
	back.From = "aside/" + rep.Aside.ID
	if _, err := b.Keeper.RestoreKept(ctx, back); err != nil {
		t.Fatalf("putting the logical aside back: %v", err)
	}
	if d := sameValues(kvValues(t, ctx, kv, keys), live); d != "" {
		t.Errorf("after putting the aside back the keys are not the live ones:\n%s", d)
	}
}

// watchUntil reads the watcher's updates until it has seen every key of
// want with a new revision, or the updates stop coming for a while.
func watchUntil(t *testing.T, w jetstream.KeyWatcher, want map[string]bool) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for len(seen) < len(want) {
		select {
		case e := <-w.Updates():
			if e != nil && want[e.Key()] {
				seen[e.Key()] = true
			}
		case <-time.After(10 * time.Second):
			return seen
		}
	}
	return seen
}

// TestLogicalRestoreRefusesAPlainStream asks a logical restore of the
// sample kept data, which holds a plain stream: refused, with the reason,
// and nothing changed or set aside.
func TestLogicalRestoreRefusesAPlainStream(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	e.change()
	live := e.kept()
	r := req(1, "fp")
	r.Method = "logical"
	_, err := e.k.RestoreKept(e.ctx, r)
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("logical restore of a kept data with a plain stream: %v, want a conflict", err)
	}
	mustContain(t, err.Error(), "KV buckets", e.names.Stream, "nothing was changed")
	if d := diffKept(e, live); d != "" {
		t.Errorf("the refused restore changed the kept data:\n%s", d)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.dir, "aside")); len(ents) != 0 {
		t.Errorf("the refused restore set something aside: %v", ents)
	}
}
