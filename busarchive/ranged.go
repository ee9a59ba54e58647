package busarchive

import (
	"bytes"
	"context"
	"fmt"
	"io"
)

// An archive may live in an object store (store.Object) rather than a file:
// every read is then a request. Open's scan of the tar headers goes through
// scanCache, so it takes a handful of requests rather than several per
// entry, and an entry's data is read with one ranged read (rangeReader)
// where the archive offers it, instead of one request per block. A file
// (rawConner) is read as before: O_DIRECT or readahead hints, then ReadAt.

// rangeReader is an archive that reads a range front to back, streaming, in
// one request (store.Object does).
type rangeReader interface {
	Reader(ctx context.Context, off, n int64) (io.ReadCloser, error)
}

// entryReader reads an entry's n bytes at off front to back: through one
// ranged read where r offers it (nil otherwise). Its Read returns
// io.ErrUnexpectedEOF when the range ends early, like seqReader's.
func entryReader(ctx context.Context, r io.ReaderAt, off, n int64) (io.ReadCloser, bool, error) {
	rr, ok := r.(rangeReader)
	if !ok {
		return nil, false, nil
	}
	if n == 0 {
		return io.NopCloser(bytes.NewReader(nil)), true, nil
	}
	rc, err := rr.Reader(ctx, off, n)
	if err != nil {
		return nil, true, fmt.Errorf("read the archive's bytes %d to %d: %w", off, off+n, err)
	}
	return &rangedReader{rc: rc, left: n}, true, nil
}

// rangedReader hands out exactly the range's bytes.
type rangedReader struct {
	rc   io.ReadCloser
	left int64
}

func (r *rangedReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	switch {
	case err == io.EOF && r.left > 0:
		err = io.ErrUnexpectedEOF // the range is shorter than Open found the entry
	case err == io.EOF:
		err = nil // the next Read says EOF
	}
	return n, err
}

func (r *rangedReader) Close() error { return r.rc.Close() }

// errSource is a blockSource that fails at once.
type errSource struct{ err error }

func (s errSource) fill([]byte) ([]byte, error) { return nil, s.err }
func (s errSource) close()                      {}
func (s errSource) newBlock() []byte            { return nil }

// Read-ahead of Open's scan: a block of scanFirstBlock bytes where a read
// lands outside the block held, doubling up to scanMaxBlock while the reads
// go on where the block ended.
const (
	scanFirstBlock = 8 << 10
	scanMaxBlock   = 64 << 10
)

// scanCache serves Open's small reads of the tar headers (a header, the last
// byte and the padding of the entry before it, backup.json and
// manifest.json, which follow their headers) from one block it reads ahead.
// What it returns is what r would: the same bytes, and r's error for a read
// that reaches past what r gave. It never reads past size, and reads at
// least scanMaxBlock bytes straight into the caller's buffer. It is used by
// one goroutine.
type scanCache struct {
	r     io.ReaderAt
	size  int64
	buf   []byte // the block: the bytes at off
	off   int64
	block int // the size of the block last read
}

func newScanCache(r io.ReaderAt, size int64) *scanCache {
	return &scanCache{r: r, size: size}
}

func (c *scanCache) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for len(p) > 0 {
		if off >= c.off && off < c.off+int64(len(c.buf)) {
			k := copy(p, c.buf[off-c.off:])
			p, off, n = p[k:], off+int64(k), n+k
			continue
		}
		if off < 0 || off >= c.size {
			return n, io.EOF
		}
		if len(p) >= scanMaxBlock {
			m, err := c.r.ReadAt(p, off)
			return n + m, err
		}
		if len(c.buf) > 0 && off == c.off+int64(len(c.buf)) {
			c.block = min(2*c.block, scanMaxBlock)
		} else {
			c.block = scanFirstBlock
		}
		want := min(int64(max(len(p), c.block)), c.size-off)
		if c.buf == nil {
			c.buf = make([]byte, 0, scanMaxBlock)
		}
		m, err := c.r.ReadAt(c.buf[:want], off)
		c.buf, c.off = c.buf[:m], off
		if m < len(p) && (err != nil || m == 0) {
			k := copy(p, c.buf)
			if err == nil {
				err = io.ErrNoProgress
			}
			return n + k, err
		}
		// The block holds p now; an error about bytes after p is r's to
		// say when they are asked for.
	}
	return n, nil
}
