package transfer_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/transfer"
)

// TestCopyCarriesTheKeyIndexes: copy takes a point's key indexes with it,
// byte for byte; a copy run again puts back one missing from the target;
// one damaged in the source fails the copy of its point, saying so.
func TestCopyCarriesTheKeyIndexes(t *testing.T) {
	b := newBed(t)
	snap := snapshot(t, b, 1, "fp")
	var names []string
	for _, s := range snap.Point.Streams {
		if s.KeyIndex != nil {
			names = append(names, s.KeyIndex.Object)
		}
	}
	if len(names) != 2 {
		t.Fatalf("the sample's point names key indexes %v, want those of its KV bucket and object store", names)
	}
	to := t.TempDir()
	copyAll := func() error {
		_, err := transfer.CopyStores(b.Ctx, testbed.FileStore(t, b.Dir), testbed.FileStore(t, to), module, local, nil, nil)
		return err
	}
	same := func() {
		t.Helper()
		for _, name := range names {
			want, _ := os.ReadFile(filepath.Join(snap.Dir, name))
			got, err := os.ReadFile(filepath.Join(to, snap.Point.Dir, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("the copy's %s: %d bytes, %v; want the %d of the original", name, len(got), err, len(want))
			}
		}
	}
	if err := copyAll(); err != nil {
		t.Fatalf("copy: %v", err)
	}
	same()
	if err := os.Remove(filepath.Join(to, snap.Point.Dir, names[0])); err != nil {
		t.Fatal(err)
	}
	if err := copyAll(); err != nil {
		t.Fatalf("copy again: %v", err)
	}
	same()

	to = t.TempDir()
	path := filepath.Join(snap.Dir, names[1])
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 1
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := copyAll(); err == nil || !strings.Contains(err.Error(), "key index of stream") {
		t.Fatalf("copying a point whose key index is damaged: %v", err)
	} else {
		t.Logf("copy: %v", err)
	}
}
