package keeper_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestNamesAtTheLimit takes a point of, restores and discards the aside of
// a kept data whose module and local are together exactly MaxKeptLen bytes:
// every name made of them (aside id and directory, streams, KV keys) fits.
func TestNamesAtTheLimit(t *testing.T) {
	e := newEnv(t)
	m := strings.Repeat("m", keeper.MaxKeptLen/2)
	l := strings.Repeat("l", keeper.MaxKeptLen-len(m))
	kv, err := e.js.CreateKeyValue(e.ctx, jetstream.KeyValueConfig{Bucket: m + "_" + l})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(e.ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	r := keeper.Request{Module: m, Local: l, Form: 1, Fingerprint: strings.Repeat("f", keeper.MaxNameLen), Caller: "t", Why: "limit"}
	if _, err := e.k.SnapshotKept(e.ctx, r); err != nil {
		t.Fatalf("snapshot at the limit: %v", err)
	}
	if _, err := kv.PutString(e.ctx, "k", "after"); err != nil {
		t.Fatal(err)
	}
	rep, err := e.k.RestoreKept(e.ctx, r)
	if err != nil {
		t.Fatalf("restore at the limit: %v", err)
	}
	if got, err := kv.Get(e.ctx, "k"); err != nil || string(got.Value()) != "before" {
		t.Fatalf("after the restore k is %v (%v), want before", got, err)
	}
	if n := len(filepath.Base(rep.Aside.Dir) + ".partial"); n > 255 {
		t.Errorf("the aside's directory name is %d bytes", n)
	}
	if _, err := e.k.DiscardAside(e.ctx, keeper.Request{From: rep.Aside.ID, Caller: "t", Why: "limit"}); err != nil {
		t.Fatalf("discard at the limit: %v", err)
	}
}

// TestDirectoriesRemovedByHandAreMadeAgain: a keeper whose points/ and
// aside/ directories were removed by hand takes points and restores
// without a restart, making them again 0700.
func TestDirectoriesRemovedByHandAreMadeAgain(t *testing.T) {
	e := newEnv(t)
	for _, d := range []string{"points", "aside"} {
		if err := os.RemoveAll(filepath.Join(e.dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	e.snapshot(1, "fp")
	if err := os.RemoveAll(filepath.Join(e.dir, "aside")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.RestoreKept(e.ctx, req(1, "fp")); err != nil {
		t.Fatalf("restore after aside/ was removed: %v", err)
	}
	for _, d := range []string{"points", "aside"} {
		fi, err := os.Lstat(filepath.Join(e.dir, d))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 directory", d, fi.Mode(), err)
		}
	}
}
