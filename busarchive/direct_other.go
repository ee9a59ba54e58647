//go:build !linux

package busarchive

import (
	"io"
	"os"
)

// openDirect reads through the page cache where O_DIRECT is not used.
func openDirect(r io.ReaderAt, off, size int64) blockSource { return nil }

func alignedBlock() []byte { return make([]byte, verifyBlock) }

func alignedBuffer(n int) []byte { return make([]byte, n) }

// openDirectWrite: no O_DIRECT here.
func openDirectWrite(f *os.File) *os.File { return nil }
