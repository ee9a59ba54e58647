package busarchive

import "golang.org/x/sys/unix"

// startWriteback asks Linux to begin writing a range of the file to disk,
// without waiting for it (sync_file_range with SYNC_FILE_RANGE_WRITE). Its
// error is ignored: the final fsync is what makes the archive durable.
func startWriteback(fd uintptr, off, n int64) {
	_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
