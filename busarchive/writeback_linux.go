package busarchive

import "golang.org/x/sys/unix"

// startWriteback asks Linux to begin writing a range of the file to disk,
// without waiting for it (sync_file_range with SYNC_FILE_RANGE_WRITE). Its
// error is ignored: the final fsync is what makes the archive durable.
func startWriteback(fd uintptr, off, n int64) {
	_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// dropBehind waits until a range whose writeback started one step earlier is
// on disk (by then it normally is) and tells Linux its pages will not be
// needed again. Errors are ignored: the pages then stay cached, nothing more.
func dropBehind(fd uintptr, off, n int64) {
	if err := unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER); err != nil {
		return
	}
	_ = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED)
}

// willNeed asks Linux to start reading a range into the page cache.
func willNeed(fd uintptr, off, n int64) { _ = unix.Fadvise(int(fd), off, n, unix.FADV_WILLNEED) }

// dontNeed tells Linux that a range that was read will not be read again soon.
func dontNeed(fd uintptr, off, n int64) { _ = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED) }
