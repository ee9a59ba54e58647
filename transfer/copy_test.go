package transfer_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"filippo.io/age"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/transfer"
)

const (
	module = "billing"
	local  = "ledger"
)

// newBed is the test bed with the sample kept data made on its bus before
// the keeper opens; fns change the keeper's config.
func newBed(t *testing.T, fns ...func(*keeper.Config)) *testbed.Bed {
	t.Helper()
	version := func(c *keeper.Config) { c.Version = "test" }
	return testbed.New(t, testbed.WithConfig(version), testbed.WithConfig(fns...), testbed.WithData(func(ctx context.Context, js jetstream.JetStream) error {
		return sample.Create(ctx, js, module, local)
	}))
}

func req(form int, fp string) keeper.Request {
	return keeper.Request{Module: module, Local: local, Form: form, Fingerprint: fp, Caller: "test", Why: "testing"}
}

// snapshot takes the point form/fp of the sample kept data.
func snapshot(t *testing.T, b *testbed.Bed, form int, fp string) *keeper.Reply {
	t.Helper()
	r := req(form, fp)
	r.CatchUp = "ledger-migrate"
	rep, err := b.Keeper.SnapshotKept(b.Ctx, r)
	if err != nil {
		t.Fatalf("snapshot-kept: %v", err)
	}
	return rep
}

// TestCopyCarriesTheEvidence: copy takes the evidence report beside an
// aside (evidence.json and summary.md) with it, byte for byte, and a copy
// run again over an equal aside brings a report written since.
func TestCopyCarriesTheEvidence(t *testing.T) {
	b := newBed(t)
	snapshot(t, b, 1, "fp")
	if err := sample.Change(b.Ctx, b.JS, module, local); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Keeper.RestoreKept(b.Ctx, req(1, "fp"))
	if err != nil {
		t.Fatal(err)
	}
	newDir := t.TempDir()
	if _, err := transfer.CopyStores(b.Ctx, testbed.FileStore(t, b.Dir), testbed.FileStore(t, newDir), module, local, nil, nil); err != nil {
		t.Fatalf("copy: %v", err)
	}
	if err := os.Remove(filepath.Join(newDir, rep.Aside.Dir, "summary.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := transfer.CopyStores(b.Ctx, testbed.FileStore(t, b.Dir), testbed.FileStore(t, newDir), module, local, nil, nil); err != nil {
		t.Fatalf("copy again: %v", err)
	}
	for _, name := range []string{"evidence.json", "summary.md"} {
		want, err := os.ReadFile(filepath.Join(b.Dir, rep.Aside.Dir, name))
		if err != nil {
			t.Fatalf("the restore wrote no %s: %v", name, err)
		}
		got, err := os.ReadFile(filepath.Join(newDir, rep.Aside.Dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("the copy's %s: %d bytes, %v; want the %d of the original", name, len(got), err, len(want))
		}
	}
}

func TestCopyCopiesCiphertextAsStored(t *testing.T) {
	sealed, _ := sealing(t)
	b := newBed(t, sealed)
	snap := snapshot(t, b, 2, "sealed")
	to := t.TempDir()
	rep, err := transfer.CopyStores(context.Background(), testbed.FileStore(t, b.Dir), store.Store(testbed.FileStore(t, to)), "", "", nil, nil)
	if err != nil || len(rep.Copied) != 1 || len(rep.Encrypted) != 1 {
		t.Fatalf("copy: %+v, %v", rep, err)
	}
	a, _ := os.ReadFile(filepath.Join(snap.Dir, "bus.tar.age"))
	c, err := os.ReadFile(filepath.Join(to, "points/billing/ledger/f2-sealed/bus.tar.age"))
	if err != nil || !bytes.Equal(a, c) {
		t.Fatalf("the copy is not the stored ciphertext (%v)", err)
	}
}

// sealing is a keeper configuration that encrypts to a new identity, and
// the opener of that identity.
func sealing(t *testing.T) (func(*keeper.Config), *agecrypt.Opener) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	seal, err := agecrypt.NewSealer([]string{id.Recipient().String()})
	if err != nil {
		t.Fatal(err)
	}
	opener := agecrypt.NewOpener([]age.Identity{id})
	return func(c *keeper.Config) { c.Seal, c.Unseal = seal, opener }, opener
}
