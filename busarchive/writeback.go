package busarchive

import "syscall"

// writebackEvery is how many written bytes the writer lets gather before it
// asks the kernel to start writing them to disk.
const writebackEvery = 16 << 20

// writeback starts the kernel writing the archive's bytes to disk while the
// snapshot still arrives, so that the final Sync in Commit finds little left
// to write instead of the whole archive. It is only a hint: it never waits,
// and what it cannot do is left to that Sync, which alone makes the archive
// durable.
type writeback struct {
	raw  syscall.RawConn // nil when the file offers no descriptor
	from int64           // start of the bytes not yet handed to the kernel
}

func newWriteback(f File, start int64) writeback {
	sc, ok := f.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return writeback{from: start}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return writeback{from: start}
	}
	return writeback{raw: raw, from: start}
}

// wrote notes that the archive now ends at off, and hints the kernel once
// enough bytes have gathered.
func (wb *writeback) wrote(off int64) {
	if wb.raw == nil || off-wb.from < writebackEvery {
		return
	}
	from, n := wb.from, off-wb.from
	wb.from = off
	_ = wb.raw.Control(func(fd uintptr) { startWriteback(fd, from, n) })
}
