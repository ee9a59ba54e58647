package filestore

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nats-keeper/nats-keeper/store"
)

// Whole blocks go straight to the disk (none of their pages is left in the
// page cache); the unaligned tail and a misaligned buffer go through the
// page cache; the file holds every byte.
func TestPartsGoStraightToTheDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.newSink("points/x/bus.tar")
	if err != nil {
		t.Fatal(err)
	}
	if k.direct == nil {
		t.Skip("this file system refuses O_DIRECT, so there is no direct path to test here")
	}
	w := newWriter(t.Context(), "points/x/bus.tar", k)
	data := make([]byte, 2*store.PartSize+5000)
	rand.NewChaCha8([32]byte{1}).Read(data)
	w.Write(data)
	if _, err := w.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "points/x/bus.tar")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer unix.Munmap(m)
	pages := (len(data) + os.Getpagesize() - 1) / os.Getpagesize()
	vec := make([]byte, pages)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Skipf("mincore: %v", errno)
	}
	cached := 0
	for _, v := range vec[:2*store.PartSize/os.Getpagesize()] {
		cached += int(v & 1)
	}
	if cached > 0 {
		t.Errorf("%d pages of the two whole parts are in the page cache: they were not written with O_DIRECT", cached)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Error("the file differs from the bytes written")
	}
}

// A buffer whose address is not aligned is written through the page cache.
func TestMisalignedPartIsWrittenThroughThePageCache(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.newSink("k")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Abort(t.Context())
	buf := make([]byte, store.PartSize+directAlign+1)
	odd := buf[1 : 1+store.PartSize]
	if directLen(odd, 0) != 0 {
		t.Fatal("a misaligned buffer would be written with O_DIRECT")
	}
	for i := range odd {
		odd[i] = byte(i)
	}
	if err := k.writeAt(odd, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(odd))
	if _, err := k.f.ReadAt(got, 0); err != nil || !bytes.Equal(got, odd) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, odd))
	}
}
