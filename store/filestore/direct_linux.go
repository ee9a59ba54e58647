package filestore

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment of direct writes: offsets, lengths and buffer
// addresses. 4096 covers disks with 512-byte and 4 KiB blocks.
const directAlign = 4096

// openDirect opens the temporary file name in dir (just made as fd) again
// with O_DIRECT, for the parts' whole blocks: an object is written once and
// read back only by a verify or a restore, so the page cache would only
// cost (the kernel's copy, its writeback, memory taken from the bus's hot
// data). It returns nil where the file system refuses O_DIRECT, or the name
// is no longer that file.
func openDirect(dir int, name string, fd int) *os.File {
	d, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_DIRECT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	var a, b unix.Stat_t
	if unix.Fstat(fd, &a) != nil || unix.Fstat(d, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		unix.Close(d)
		return nil
	}
	return os.NewFile(uintptr(d), name+" (direct)")
}

// directLen is how many of p's first bytes may be written at off with
// O_DIRECT: its whole blocks, if p's address and off are aligned.
func directLen(p []byte, off int64) int {
	if len(p) < directAlign || off%directAlign != 0 || uintptr(unsafe.Pointer(&p[0]))%directAlign != 0 {
		return 0
	}
	return len(p) &^ (directAlign - 1)
}

// dropCache tells the kernel the n bytes of f at off will not be read again
// soon (a held part read back for its hash), so their pages may go.
func dropCache(f *os.File, off, n int64) {
	unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
