package busarchive

import "syscall"

// writebackEvery is how many written bytes the writer lets gather before it
// asks the kernel to start writing them to disk.
const writebackEvery = 16 << 20

// writeback starts the kernel writing the archive's bytes to disk while the
// snapshot still arrives, so that the final Sync in Commit finds little left
// to write instead of the whole archive. One step later, once that range is
// on disk, it lets the kernel drop the range from the page cache
// (drop-behind): an archive is written once and read back only by a verify or
// a restore, so caching it would only push the bus's own hot data out of
// memory, and the pages the kernel frees are reused for the next range
// instead of new memory being taken for every byte of the archive (on a
// virtual machine whose host takes back free memory, touching new memory is
// the largest cost of writing a large file).
//
// It is only a hint: what it cannot do is left to the final Sync, which alone
// makes the archive durable.
type writeback struct {
	raw            syscall.RawConn // nil when the file offers no descriptor
	from           int64           // start of the bytes not yet handed to the kernel
	prevOff, prevN int64           // the range handed over one step earlier
}

func newWriteback(f File, start int64) writeback {
	sc, ok := f.(rawConner)
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
	prevOff, prevN := wb.prevOff, wb.prevN
	wb.from, wb.prevOff, wb.prevN = off, from, n
	_ = wb.raw.Control(func(fd uintptr) {
		startWriteback(fd, from, n)
		if prevN > 0 {
			dropBehind(fd, prevOff, prevN)
		}
	})
}
