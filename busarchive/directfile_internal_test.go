package busarchive

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func newTestDirectFile(t *testing.T) (*DirectFile, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	df := NewDirectFile(f)
	if df == nil {
		t.Skip("this file system refuses O_DIRECT, so there is no direct path to test here")
	}
	t.Cleanup(func() { df.Close() })
	return df, path
}

// A direct write the file system refuses (here: a buffer whose address is not
// aligned, which Linux refuses with EINVAL) is made through the ordinary
// descriptor, and so is every later one: the file still holds what was
// written.
func TestDirectFileFallsBackWhenADirectWriteIsRefused(t *testing.T) {
	df, path := newTestDirectFile(t)
	odd := make([]byte, directChunk+1)
	df.cur = odd[1:1:len(odd)] // misaligned by one byte
	want := bytes.Repeat([]byte("0123456789abcdef"), 3*directChunk/16+5)
	if _, err := df.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := df.Sync(); err != nil {
		t.Fatalf("Sync after a refused direct write: %v", err)
	}
	if !df.fellBack.Load() {
		t.Fatal("the misaligned direct write was taken, so the fallback was not exercised")
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the file holds %d bytes, not the %d written (or not the same)", len(got), len(want))
	}
}

// A direct write that fails for good makes the next Write and Sync fail, so
// the archive is never committed over a hole.
func TestDirectFileReportsAFailedWrite(t *testing.T) {
	df, path := newTestDirectFile(t)
	ro, err := os.Open(path) // a descriptor that cannot write: EBADF
	if err != nil {
		t.Fatal(err)
	}
	df.d.Close()
	df.d = ro
	if _, err := df.Write(make([]byte, directChunk+10)); err != nil {
		t.Fatalf("the first Write only hands a block over, yet failed: %v", err)
	}
	df.pending.Wait()
	if _, err := df.Write([]byte("x")); err == nil {
		t.Error("Write after a failed direct write succeeded")
	}
	if err := df.Sync(); err == nil {
		t.Error("Sync after a failed direct write succeeded")
	}
}
