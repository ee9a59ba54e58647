package keeper_test

import (
	"bytes"
	"context"
	"errors"

	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"filippo.io/age"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/fault"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
)

// The key index bed: shop/cart, a KV bucket of indexKeys keys of 4 KiB of
// random bytes (an archive of several s2 chunks), with the bytes read from
// the point's archive counted.
const indexKeys = 2000

type indexBed struct {
	*testbed.Bed
	kv   jetstream.KeyValue
	read atomic.Int64 // bytes read from points/…/bus.tar
}

func newIndexBed(t *testing.T, opts ...func(*keeper.Config)) *indexBed {
	t.Helper()
	ib := &indexBed{}
	count := func(c *keeper.Config) {
		fs := &fault.Store{}
		fs.Wrap(c)
		fs.OnOpen(func(ctx context.Context, key string, next fault.OpenFunc) (store.Object, error) {
			o, err := next(ctx, key)
			if err != nil || !strings.HasPrefix(key, "points/") || !strings.Contains(key, "/bus.tar") {
				return o, err
			}
			return &fault.Object{Object: o, Take: func(n int64) int64 { ib.read.Add(n); return n }}, nil
		})
	}
	ib.Bed = testbed.New(t, testbed.WithConfig(opts...), testbed.WithConfig(count), testbed.WithData(func(ctx context.Context, js jetstream.JetStream) error {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: logicalModule + "_" + kvLocal, History: 1})
		if err != nil {
			return err
		}
		r := rand.New(rand.NewPCG(7, 7))
		for i := range indexKeys {
			v := make([]byte, 4<<10)
			for j := range v {
				v[j] = byte(r.Uint32())
			}
			if _, err := kv.Put(ctx, kvKey(i), v); err != nil {
				return err
			}
		}
		return nil
	}))
	kv, err := ib.JS.KeyValue(ib.Ctx, logicalModule+"_"+kvLocal)
	if err != nil {
		t.Fatal(err)
	}
	ib.kv = kv
	return ib
}

// change rewrites three keys, deletes one and adds one; it returns the
// point's values of every key it touched.
func (ib *indexBed) change(t *testing.T) map[string]kvValue {
	t.Helper()
	keys := []string{kvKey(5), kvKey(1000), kvKey(1999), kvKey(700), kvKey(indexKeys)}
	point := kvValues(t, ib.Ctx, ib.kv, keys)
	for _, k := range keys[:3] {
		if _, err := ib.kv.PutString(ib.Ctx, k, "rewritten"); err != nil {
			t.Fatal(err)
		}
	}
	if err := ib.kv.Delete(ib.Ctx, keys[3]); err != nil {
		t.Fatal(err)
	}
	if _, err := ib.kv.PutString(ib.Ctx, keys[4], "added"); err != nil {
		t.Fatal(err)
	}
	return point
}

// TestLogicalRestoreReadsThroughTheKeyIndex: snapshot-kept writes the key
// index of the bucket beside the archive and names it in point.json;
// verify-kept checks it; a logical restore reads a small part of the
// archive, not the archive whole, and writes the point's values; discarding
// the point removes the index too.
func TestLogicalRestoreReadsThroughTheKeyIndex(t *testing.T) {
	ib := newIndexBed(t)
	ctx := ib.Ctx
	snap, err := ib.Keeper.SnapshotKept(ctx, pointReq(kvLocal))
	if err != nil {
		t.Fatal(err)
	}
	ki := snap.Point.Streams[0].KeyIndex
	if ki == nil || ki.Object != "keys-KV_shop_cart.idx" || ki.Size <= 0 || ki.Sum == "" {
		t.Fatalf("point.json's stream sum names the key index %+v", ki)
	}
	if st, err := os.Stat(filepath.Join(snap.Dir, ki.Object)); err != nil || st.Size() != ki.Size || st.Mode().Perm() != 0o600 {
		t.Fatalf("the key index in the store: %v, %v", st, err)
	}
	ver, err := ib.Keeper.VerifyKept(ctx, pointReq(kvLocal))
	if err != nil {
		t.Fatalf("verify-kept: %v", err)
	}
	mustContain(t, ver.Said, "key index of 1 stream(s) matches point.json and agrees with the archive")

	if n := ib.changeAndRestore(t); n > 256<<10 {
		t.Fatalf("the logical restore read %d bytes of the point's archive of %d: not only what it writes", n, snap.Point.ArchiveSize)
	} else {
		t.Logf("the logical restore read %d bytes of the point's archive of %d", n, snap.Point.ArchiveSize)
	}

	if _, err := ib.Keeper.DiscardPoint(ctx, pointReq(kvLocal)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(snap.Dir, ki.Object)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the key index outlived its point: %v", err)
	}
}

// TestEncryptedKeyIndex: an encrypted point's key index is sealed as its
// archive is (no key name in the clear), and a logical restore reads
// through it, decrypting only the ranges it reads.
func TestEncryptedKeyIndex(t *testing.T) {
	id := newIdentity(t)
	ib := newIndexBed(t, func(c *keeper.Config) {
		c.Seal, c.Unseal = sealer(t, []string{id.Recipient().String()}), opener([]age.Identity{id})
	})
	ctx := ib.Ctx
	snap, err := ib.Keeper.SnapshotKept(ctx, pointReq(kvLocal))
	if err != nil {
		t.Fatal(err)
	}
	ki := snap.Point.Streams[0].KeyIndex
	if ki == nil || ki.Object != "keys-KV_shop_cart.idx.age" {
		t.Fatalf("point.json's stream sum names the key index %+v", ki)
	}
	if b, err := os.ReadFile(filepath.Join(snap.Dir, ki.Object)); err != nil || bytes.Contains(b, []byte(kvKey(1234))) {
		t.Fatalf("the sealed key index holds key names in the clear (%v)", err)
	}
	if _, err := ib.Keeper.VerifyKept(ctx, pointReq(kvLocal)); err != nil {
		t.Fatalf("verify-kept: %v", err)
	}
	if n := ib.changeAndRestore(t); n > 1<<20 { // the age chunks (64 KiB) of what it reads
		t.Fatalf("the logical restore read %d bytes of the point's encrypted archive of %d", n, snap.Point.ArchiveSize)
	}
}

// changeAndRestore changes the bucket, restores the point logically,
// checks the keys are the point's, and returns the bytes read from the
// point's archive meanwhile.
func (ib *indexBed) changeAndRestore(t *testing.T) int64 {
	t.Helper()
	point := ib.change(t)
	ib.read.Store(0)
	rep, err := ib.Keeper.RestoreKept(ib.Ctx, logicalReq(kvLocal))
	if err != nil {
		t.Fatalf("logical restore: %v", err)
	}
	if d := sameValues(kvValues(t, ib.Ctx, ib.kv, valueKeys(point)), point); d != "" {
		t.Fatalf("after the logical restore the keys are not the point's:\n%s", d)
	}
	if len(rep.Streams) != 1 || !strings.Contains(rep.Streams[0].Why, "5 of 2,001 keys differ") {
		t.Fatalf("reply streams: %+v", rep.Streams)
	}
	return ib.read.Load()
}

func valueKeys(m map[string]kvValue) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestDamagedKeyIndexIsReadAround: a key index that is damaged or missing
// fails verify-kept, naming it, and a logical restore reads the archive
// whole instead, and restores.
func TestDamagedKeyIndexIsReadAround(t *testing.T) {
	for _, how := range []string{"flipped", "missing"} {
		t.Run(how, func(t *testing.T) {
			ib := newIndexBed(t)
			ctx := ib.Ctx
			snap, err := ib.Keeper.SnapshotKept(ctx, pointReq(kvLocal))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(snap.Dir, snap.Point.Streams[0].KeyIndex.Object)
			if how == "missing" {
				err = os.Remove(path)
			} else {
				err = flipByte(path, 100)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = ib.Keeper.VerifyKept(ctx, pointReq(kvLocal))
			if !errors.Is(err, keeper.ErrDamaged) || !strings.Contains(err.Error(), "key index of stream KV_shop_cart") {
				t.Fatalf("verify-kept of a point whose key index is %s: %v", how, err)
			}
			t.Logf("verify-kept: %v", err)
			if n := ib.changeAndRestore(t); n < snap.Point.ArchiveSize/2 {
				t.Fatalf("the logical restore read %d bytes of the archive of %d: not whole", n, snap.Point.ArchiveSize)
			}
		})
	}
}

func flipByte(path string, at int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		return err
	}
	b[0] ^= 0x20
	_, err = f.WriteAt(b, at)
	return err
}
