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

// TestLogicalRestoreRecoversAfterCrash stops a logical restore as a killed
// keeper would, at its journal and in the middle of its writes; a keeper
// started again finishes it: every key the point's, no journal left.
func TestLogicalRestoreRecoversAfterCrash(t *testing.T) {
	for _, step := range []string{"journal-written", "logical-key:$KV." + logicalModule + "_" + kvLocal + "." + kvKey(21)} {
		t.Run(step, func(t *testing.T) {
			const n = 200
			hookOn := false
			b, kv := kvBed(t, n, func(c *keeper.Config) {
				c.StepHook = func(s string) {
					if hookOn && s == step {
						panic(crash{s})
					}
				}
			})
			ctx := b.Ctx
			if _, err := b.Keeper.SnapshotKept(ctx, pointReq(kvLocal)); err != nil {
				t.Fatal(err)
			}
			point := kvValues(t, ctx, kv, changeKVKeys(n))
			keys := changeKV(t, ctx, kv, n)
			func() {
				hookOn = true
				defer func() {
					hookOn = false
					if _, ok := recover().(crash); !ok {
						t.Fatalf("the restore did not stop at %s", step)
					}
				}()
				b.Keeper.RestoreKept(ctx, logicalReq(kvLocal))
			}()
			if _, err := b.Bus.Get(ctx, "journal."+logicalModule+"."+kvLocal); err != nil {
				t.Fatalf("no journal left by the stopped restore: %v", err)
			}
			k2, err := b.KeeperOn(b.Dir)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := k2.Recover(ctx)
			if said := rec.Said(); err != nil || len(said) != 1 || !strings.Contains(said[0], "was completed") {
				t.Fatalf("recover: %v %q", err, said)
			}
			if d := sameValues(kvValues(t, ctx, kv, keys), point); d != "" {
				t.Errorf("after recovery the keys are not the point's:\n%s", d)
			}
			if _, err := b.Bus.Get(ctx, "journal."+logicalModule+"."+kvLocal); !errors.Is(err, keeper.ErrNotFound) {
				t.Errorf("journal left after recovery: %v", err)
			}
			if again, err := k2.Recover(ctx); err != nil || len(again) != 0 {
				t.Errorf("second recover: %v %+v", err, again)
			}
		})
	}
}

// changeKVKeys is every key changeKV leaves the bucket knowing.
func changeKVKeys(n int) []string {
	keys := make([]string, 0, n+10)
	for i := range n + 10 {
		keys = append(keys, kvKey(i))
	}
	return keys
}

// TestLogicalRestoreObjectStore rolls back an object store whose object a
// was replaced, d added and b deleted after the point: each object's bytes
// are then the point's, d is gone, c untouched; putting the aside back
// returns the live objects.
func TestLogicalRestoreObjectStore(t *testing.T) {
	bytesOf := func(name string, n int) []byte {
		out := make([]byte, n)
		for i := range out {
			out[i] = byte(len(name)*31 + i*7 + n)
		}
		return out
	}
	small := &jetstream.ObjectMetaOptions{ChunkSize: 1000}
	b := testbed.New(t, testbed.WithData(func(ctx context.Context, js jetstream.JetStream) error {
		obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: logicalModule + "_" + objLocal})
		if err != nil {
			return err
		}
		for _, name := range []string{"a", "b", "c"} {
			if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name, Opts: small}, bytesReader(bytesOf(name, 2500))); err != nil {
				return err
			}
		}
		return nil
	}))
	ctx := b.Ctx
	obs, err := b.JS.ObjectStore(ctx, logicalModule+"_"+objLocal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Keeper.SnapshotKept(ctx, pointReq(objLocal)); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: "a", Opts: small}, bytesReader(bytesOf("a2", 3500))); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "d", bytesOf("d", 1200)); err != nil {
		t.Fatal(err)
	}
	if err := obs.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	objects := func() map[string]string {
		out := map[string]string{}
		for _, name := range []string{"a", "b", "c", "d"} {
			data, err := obs.GetBytes(ctx, name)
			switch {
			case errors.Is(err, jetstream.ErrObjectNotFound):
				out[name] = "(none)"
			case err != nil:
				t.Fatalf("get %s: %v", name, err)
			default:
				out[name] = fmt.Sprintf("%x", data)
			}
		}
		return out
	}
	live := objects()
	rep, err := b.Keeper.RestoreKept(ctx, logicalReq(objLocal))
	if err != nil {
		t.Fatalf("logical restore: %v", err)
	}
	want := map[string]string{"a": fmt.Sprintf("%x", bytesOf("a", 2500)), "b": fmt.Sprintf("%x", bytesOf("b", 2500)),
		"c": fmt.Sprintf("%x", bytesOf("c", 2500)), "d": "(none)"}
	if got := objects(); fmt.Sprint(got) != fmt.Sprint(want) {
		for name := range want {
			if got[name] != want[name] {
				t.Errorf("object %s after the logical restore: %.40s…, want %.40s…", name, got[name], want[name])
			}
		}
	}
	if len(rep.Streams) != 1 || rep.Streams[0].Objects == nil || rep.Streams[0].Objects.Added != 1 || rep.Streams[0].Objects.Deleted != 1 || rep.Streams[0].Objects.Changed != 1 {
		t.Errorf("reply streams: %+v, want one object store with 1 added, 1 deleted, 1 changed", rep.Streams)
	}
	if rep.Evidence == nil || rep.Evidence.Verdict != keeper.Pass {
		t.Fatalf("evidence: %+v", rep.Evidence)
	}
	back := logicalReq(objLocal)
	back.From = "aside/" + rep.Aside.ID
	if _, err := b.Keeper.RestoreKept(ctx, back); err != nil {
		t.Fatalf("putting the logical aside back: %v", err)
	}
	if got := objects(); fmt.Sprint(got) != fmt.Sprint(live) {
		t.Errorf("after putting the aside back the objects are not the live ones")
	}
}

func bytesReader(b []byte) *strings.Reader { return strings.NewReader(string(b)) }
