package busarchive_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// DirectFile gives the same file as plain writes: appends of every size
// across its 1 MiB blocks, and patches (as the writer makes to tar headers)
// in the block being filled, in blocks already handed over, and across the
// two.
func TestDirectFileWritesWhatItIsGiven(t *testing.T) {
	df, path := directOrPlain(t, "f")
	var want []byte
	rng := rand.New(rand.NewPCG(7, 8))
	piece := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for i := range 400 {
		p := piece(rng.IntN(40_000) + 1)
		if i%50 == 0 {
			p = piece(3<<20 + rng.IntN(1000)) // more than a block at once
		}
		if n, err := df.Write(p); err != nil || n != len(p) {
			t.Fatalf("write %d bytes: %d, %v", len(p), n, err)
		}
		want = append(want, p...)
		if i%7 == 0 {
			// A patch somewhere in what was written, sometimes right at the
			// end (in the buffer), sometimes far back (handed over).
			n := rng.IntN(2000) + 1
			off := len(want) - n - rng.IntN(min(len(want)-n+1, 3<<20))
			if i%21 == 0 {
				off = max(0, len(want)-n-rng.IntN(600))
			}
			p := piece(n)
			if _, err := df.WriteAt(p, int64(off)); err != nil {
				t.Fatalf("patch %d bytes at %d: %v", n, off, err)
			}
			copy(want[off:], p)
		}
	}
	// Patches across every 1 MiB boundary written so far.
	for b := 1 << 20; b < len(want)-600; b += 1 << 20 {
		p := piece(600)
		if _, err := df.WriteAt(p, int64(b-300)); err != nil {
			t.Fatal(err)
		}
		copy(want[b-300:], p)
	}
	if _, err := df.WriteAt([]byte("x"), int64(len(want))); err == nil {
		t.Error("a patch beyond what was written was taken")
	}
	if err := df.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1234, 77} { // after Sync, writes still land in order
		tail := piece(n)
		if _, err := df.Write(tail); err != nil {
			t.Fatal(err)
		}
		want = append(want, tail...)
	}
	if err := df.Sync(); err != nil {
		t.Fatal(err)
	}
	if c, ok := df.(interface{ Close() error }); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("a second Close: %v", err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the file (%d bytes) differs from what was written (%d bytes) from byte %d", len(got), len(want), i)
	}
}

// An archive written through a DirectFile is byte for byte the one written
// through the plain file, and verifies.
func TestDirectFileArchiveEqualsPlainArchive(t *testing.T) {
	streams := []synth{{name: "A", msgs: 3000, size: 1000, consumers: 1, seed: 1}, {name: "B", msgs: 5, size: 20, seed: 2}}
	plain := writeSynthArchive(t, streams...)
	df, path := directOrPlain(t, "bus.tar")
	w := busarchive.NewWriter(df, busarchive.WriterInfo{KeeperVersion: "test", ServerVersion: "2.15.3", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	for _, s := range streams {
		if _, err := s.feed(w); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if c, ok := df.(interface{ Close() error }); ok {
		c.Close()
	}
	a, b := mustRead(t, plain), mustRead(t, path)
	if !bytes.Equal(a, b) {
		t.Fatalf("the archive through DirectFile (%d bytes) differs from the plain one (%d bytes)", len(b), len(a))
	}
	if _, err := busarchive.VerifyFile(context.Background(), path); err != nil {
		t.Fatal(err)
	}
}

// syncFile is a busarchive.File that syncs, as both a DirectFile and an
// *os.File do.
type syncFile interface {
	busarchive.File
	Sync() error
}

// directOrPlain creates an empty file under t.TempDir() and returns a
// DirectFile on it, or the plain file where the file system refuses O_DIRECT.
func directOrPlain(t *testing.T, name string) (syncFile, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if d := busarchive.NewDirectFile(f); d != nil {
		return d, path
	}
	t.Log("this file system refuses O_DIRECT; the plain file is checked")
	return f, path
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
