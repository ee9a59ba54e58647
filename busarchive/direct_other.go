//go:build !linux

package busarchive

import "io"

// openDirect reads through the page cache where O_DIRECT is not used.
func openDirect(r io.ReaderAt, off, size int64) blockSource { return nil }

func alignedBlock() []byte { return make([]byte, verifyBlock) }
