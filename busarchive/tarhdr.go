package busarchive

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

const (
	blockSize = 512
	// octalSizeLimit is the first size that does not fit the tar header's 11
	// octal digits (8 GiB); from there the size is written in GNU base-256.
	octalSizeLimit = int64(1) << 33
)

// tarHeader renders the header blocks of one regular file entry: any PAX
// extended header archive/tar needs (long names), then the entry's own
// 512-byte header, which is always the last block of the result.
func tarHeader(name string, size int64, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Size:     0, // written by setSize below, so every size takes the same path
		Mode:     0o600,
		ModTime:  mtime.UTC().Truncate(time.Second),
	})
	if err != nil {
		return nil, fmt.Errorf("render the tar header of %s: %w", name, err)
	}
	b := buf.Bytes()
	if len(b) < blockSize || len(b)%blockSize != 0 {
		return nil, fmt.Errorf("render the tar header of %s: archive/tar wrote %d bytes, not whole blocks", name, len(b))
	}
	setSize(b[len(b)-blockSize:], size)
	return b, nil
}

// setSize writes size into a 512-byte tar header block and recomputes the
// header checksum. Sizes below 8 GiB are 11 octal digits and a NUL; larger
// ones use the GNU base-256 form (high bit set, big-endian), which GNU tar,
// bsdtar and archive/tar all read.
func setSize(h []byte, size int64) {
	f := h[124:136]
	if size < octalSizeLimit {
		copy(f, fmt.Sprintf("%011o", size))
		f[11] = 0
	} else {
		clear(f)
		binary.BigEndian.PutUint64(f[4:], uint64(size))
		f[0] = 0x80
	}
	sum := h[148:156]
	copy(sum, "        ")
	var total int64
	for _, c := range h[:blockSize] {
		total += int64(c)
	}
	copy(sum, fmt.Sprintf("%06o\x00 ", total))
}

// padding is the number of zero bytes that follow n bytes of entry data.
func padding(n int64) int64 {
	return (blockSize - n%blockSize) % blockSize
}
