//go:build !linux

package filestore

import "os"

// openDirect: no O_DIRECT here; every write goes through the page cache.
func openDirect(dir int, name string, fd int) *os.File { return nil }

func directLen(p []byte, off int64) int { return 0 }

func dropCache(f *os.File, off, n int64) {}

const directAlign = 4096
