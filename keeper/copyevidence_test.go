package keeper_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestCopyCarriesTheEvidence: copy takes the evidence report beside an
// aside (evidence.json and summary.md) with it, byte for byte, and a copy
// run again over an equal aside brings a report written since.
func TestCopyCarriesTheEvidence(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	e.change()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatal(err)
	}
	newDir := t.TempDir()
	if _, err := keeper.CopyStores(e.ctx, fileStore(t, e.dir), fileStore(t, newDir), module, local, nil); err != nil {
		t.Fatalf("copy: %v", err)
	}
	if err := os.Remove(filepath.Join(newDir, rep.Aside.Dir, "summary.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := keeper.CopyStores(e.ctx, fileStore(t, e.dir), fileStore(t, newDir), module, local, nil); err != nil {
		t.Fatalf("copy again: %v", err)
	}
	for _, name := range []string{"evidence.json", "summary.md"} {
		want, err := os.ReadFile(filepath.Join(e.dir, rep.Aside.Dir, name))
		if err != nil {
			t.Fatalf("the restore wrote no %s: %v", name, err)
		}
		got, err := os.ReadFile(filepath.Join(newDir, rep.Aside.Dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("the copy's %s: %d bytes, %v; want the %d of the original", name, len(got), err, len(want))
		}
	}
}
