//go:build !linux

package busarchive

// startWriteback does nothing where sync_file_range does not exist: the
// final fsync writes everything.
func startWriteback(fd uintptr, off, n int64) {}

// dropBehind does nothing where sync_file_range does not exist.
func dropBehind(fd uintptr, off, n int64) {}

func willNeed(fd uintptr, off, n int64) {}
func dontNeed(fd uintptr, off, n int64) {}
