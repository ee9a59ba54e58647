// Package storetest is the contract suite every store backend runs: it
// proves, against a real store, each promise of package store's comment.
//
// It may import package store only.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/nats-keeper/nats-keeper/store"
)

// Run runs the contract suite. open is called once for each subtest and
// must return a new, empty store; Run closes it when the subtest ends (Close
// is safe twice, so open may also close it in a t.Cleanup of its own). One
// subtest measures the heap, so run Run in a test that is not t.Parallel.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			c.run(t, s)
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, s store.Store)
}

func cases() []testCase {
	return []testCase{
		{"RoundTrip", testRoundTrip},
		{"HoldPatchesTarHeader", testHoldPatchesTarHeader},
		{"WriteAtOutsideHoldFails", testWriteAtOutsideHold},
		{"InvisibleUntilCommit", testInvisibleUntilCommit},
		{"AbortLeavesNothing", testAbortLeavesNothing},
		{"AbortKeepsTheOldObject", testAbortKeepsOld},
		{"FailedContextLeavesNothing", testFailedContext},
		{"WriterAfterCommit", testWriterAfterCommit},
		{"CommitReplacesWhole", testReplace},
		{"ReplaceWhileOpen", testReplaceWhileOpen},
		{"List", testList},
		{"Delete", testDelete},
		{"NotFound", testNotFound},
		{"BadKeys", testBadKeys},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Copier", testCopier},
		{"SweepKeepsCommitted", testSweep},
		{"Describe", testDescribe},
		{"FreeSpacer", testFreeSpacer},
		{"CloseTwice", testCloseTwice},
		{"MemoryWriting", testMemoryWriting},
		{"MemoryReading", testMemoryReading},
	}
}

// randomBytes is n random bytes, the same for the same seed.
func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), 's'}).Read(b)
	return b
}

func checksum(data []byte) string {
	c := store.NewChecksum()
	c.Write(data)
	return c.Sum()
}

// writeAll writes data in pieces of uneven sizes, as a snapshot arrives.
func writeAll(w store.Writer, data []byte) error {
	sizes := []int{1, 511, 4096, 1<<20 + 3, 77, 3 << 20}
	for i := 0; len(data) > 0; i++ {
		k := min(len(data), sizes[i%len(sizes)])
		if n, err := w.Write(data[:k]); err != nil || n != k {
			return fmt.Errorf("write of %d bytes: wrote %d: %v", k, n, err)
		}
		data = data[k:]
	}
	return nil
}

// put makes a committed object of data at key.
func put(ctx context.Context, s store.Store, key string, data []byte) (store.Info, error) {
	w, err := s.Create(ctx, key)
	if err != nil {
		return store.Info{}, fmt.Errorf("Create(%q): %w", key, err)
	}
	defer w.Abort()
	if err := writeAll(w, data); err != nil {
		return store.Info{}, fmt.Errorf("writing %q: %w", key, err)
	}
	info, err := w.Commit(ctx)
	if err != nil {
		return store.Info{}, fmt.Errorf("Commit(%q): %w", key, err)
	}
	return info, nil
}

func mustPut(t *testing.T, s store.Store, key string, data []byte) store.Info {
	t.Helper()
	info, err := put(t.Context(), s, key, data)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// read reads the whole object at key through Open and Reader.
func read(ctx context.Context, s store.Store, key string) ([]byte, error) {
	o, err := s.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("Open(%q): %w", key, err)
	}
	defer o.Close()
	r, err := o.Reader(ctx, 0, o.Size())
	if err != nil {
		return nil, fmt.Errorf("Reader(0, %d) of %q: %w", o.Size(), key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", key, err)
	}
	return data, nil
}

// wantObject checks that key reads as data.
func wantObject(t *testing.T, s store.Store, key string, data []byte) {
	t.Helper()
	got, err := read(t.Context(), s, key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%q reads as %d bytes that differ from the %d committed (from byte %d)", key, len(got), len(data), firstDiff(got, data))
	}
}

func firstDiff(a, b []byte) int {
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	return i
}

// wantNotFound checks that Stat and Open say key holds no object.
func wantNotFound(t *testing.T, s store.Store, key, when string) {
	t.Helper()
	if info, err := s.Stat(t.Context(), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat(%q) %s: %+v, %v; want an error wrapping ErrNotFound", key, when, info, err)
	}
	o, err := s.Open(t.Context(), key)
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Open(%q) %s: %v; want an error wrapping ErrNotFound", key, when, err)
	}
	if err == nil {
		o.Close()
	}
}

// wantInfo checks an Info a store gave for key: its key, size, and sum where
// it gives one.
func wantInfo(t *testing.T, from string, got store.Info, key string, data []byte) {
	t.Helper()
	if got.Key != key || got.Size != int64(len(data)) {
		t.Errorf("%s says key %q, size %d; want %q, %d", from, got.Key, got.Size, key, len(data))
	}
	if got.Sum != "" && got.Sum != checksum(data) {
		t.Errorf("%s says sum %s; NewChecksum over the bytes says %s", from, got.Sum, checksum(data))
	}
	if got.Modified.IsZero() {
		t.Errorf("%s gives no Modified time", from)
	}
}

func keysOf(infos []store.Info) []string {
	keys := []string{}
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}
