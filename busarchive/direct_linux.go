package busarchive

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment of direct reads: offsets, lengths and buffer
// addresses. 4096 covers disks with 512-byte and 4 KiB blocks.
const directAlign = 4096

// directSource reads an entry with O_DIRECT: from the disk straight into the
// block, bypassing the page cache. A verification reads a point once, so
// caching it would only cost the kernel the copy, the page-cache bookkeeping
// and fresh memory for every byte, and push the bus's hot data out.
type directSource struct {
	f        *os.File // the archive, opened again with O_DIRECT
	pos      int64    // aligned offset of the next read
	off, end int64    // the entry
}

// openDirect opens the file behind r again with O_DIRECT for reading the
// entry [off, off+size). It returns nil when r is not a file or the file
// system does not do direct reads; the caller then reads through the page
// cache.
func openDirect(r io.ReaderAt, off, size int64) blockSource {
	sc, ok := r.(rawConner)
	if !ok || size <= 0 {
		return nil
	}
	fd := reopenDirect(sc, unix.O_RDONLY)
	if fd < 0 {
		return nil
	}
	// Some file systems take O_DIRECT at open and refuse the reads.
	start := off &^ (directAlign - 1)
	probe := alignedBlock()[:directAlign]
	if _, err := unix.Pread(fd, probe, start); err != nil {
		unix.Close(fd)
		return nil
	}
	return &directSource{f: os.NewFile(uintptr(fd), "bus.tar (direct)"), pos: start, off: off, end: off + size}
}

// newBlock is a verifyBlock buffer aligned for direct reads: the size of
// each read from the disk.
func (s *directSource) newBlock() []byte { return alignedBlock() }

func (s *directSource) fill(buf []byte) ([]byte, error) {
	if s.pos >= s.end {
		return nil, io.EOF
	}
	pos, want := s.pos, min(int64(len(buf)), alignUp(s.end-s.pos))
	got := 0
	for int64(got) < want {
		n, err := unix.Pread(int(s.f.Fd()), buf[got:want], pos+int64(got))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the archive at %d: %w", pos+int64(got), err)
		}
		if n == 0 {
			break // the end of the file
		}
		got += n
		if n%directAlign != 0 {
			break // a short read at the end of the file
		}
	}
	s.pos += int64(got)
	lo, hi := max(s.off-pos, 0), min(s.end-pos, int64(got))
	if hi <= lo {
		return nil, io.EOF // the file is shorter than the entry: the size check says so
	}
	if s.pos >= s.end || int64(got) < want {
		return buf[lo:hi], io.EOF
	}
	return buf[lo:hi], nil
}

func (s *directSource) close() { s.f.Close() }

func alignUp(n int64) int64 { return (n + directAlign - 1) &^ (directAlign - 1) }

// alignedBlock is a verifyBlock-sized buffer whose address is aligned for
// direct reads.
func alignedBlock() []byte { return alignedBuffer(verifyBlock) }

// alignedBuffer is an n-byte buffer whose address is aligned for direct I/O.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	return b[skip : skip+n : skip+n]
}

// openDirectWrite opens f's file again with O_DIRECT for writing, or returns
// nil when the file system refuses it.
func openDirectWrite(f *os.File) *os.File {
	fd := reopenDirect(f, unix.O_WRONLY)
	if fd < 0 {
		return nil
	}
	return os.NewFile(uintptr(fd), f.Name()+" (direct)")
}

// reopenDirect opens the regular file behind sc again with O_DIRECT and the
// access mode given, through /proc/self/fd/N: that names the open file
// itself, whatever its path is now, and the new descriptor is checked to be
// the same inode. It returns -1 when that cannot be done.
func reopenDirect(sc rawConner, mode int) int {
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	var st0 unix.Stat_t
	if err := raw.Control(func(p uintptr) {
		if unix.Fstat(int(p), &st0) == nil {
			fd, _ = unix.Open(fmt.Sprintf("/proc/self/fd/%d", p), mode|unix.O_DIRECT|unix.O_CLOEXEC, 0)
		}
	}); err != nil || fd < 0 {
		return -1
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Dev != st0.Dev || st.Ino != st0.Ino || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1
	}
	return fd
}
