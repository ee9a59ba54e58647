package busarchive

import (
	"io"
	"syscall"
)

// rawConner is a file that offers its descriptor (an *os.File does).
type rawConner interface {
	SyscallConn() (syscall.RawConn, error)
}

// readAhead is how far ahead of a sequential reader the kernel is asked to
// read, and how much it may leave behind it in the page cache.
const readAhead = 16 << 20

// seqReader reads one entry front to back. When the archive is a file it
// asks the kernel to read ahead of it (so a cold archive streams from disk
// while the reader hashes or sends) and to drop what it has read from the page
// cache (drop-behind): the pages are then reused for the next range instead of
// new memory being taken for every byte, and reading a point does not push the
// bus's own hot data out of memory. The hints change nothing but speed.
type seqReader struct {
	r        io.ReaderAt
	raw      syscall.RawConn // nil: no hints
	off, end int64
	advised  int64 // readahead was asked for up to here
	dropped  int64 // what lies before this was dropped
}

func newSeqReader(r io.ReaderAt, off, size int64) *seqReader {
	s := &seqReader{r: r, off: off, end: off + size, advised: off, dropped: off}
	if sc, ok := r.(rawConner); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
	return s
}

func (s *seqReader) Read(p []byte) (int, error) {
	if s.off >= s.end {
		s.Close()
		return 0, io.EOF
	}
	if rest := s.end - s.off; int64(len(p)) > rest {
		p = p[:rest]
	}
	s.hint()
	n, err := s.r.ReadAt(p, s.off)
	s.off += int64(n)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the entry is shorter than Open found it
	}
	return n, err
}

// hint asks for the next window once half of the last one was read, and drops
// what lies a whole window behind.
func (s *seqReader) hint() {
	if s.raw == nil {
		return
	}
	var ahead, aheadN, drop, dropN int64
	if s.advised < s.end && s.off+readAhead/2 >= s.advised {
		ahead = max(s.advised, s.off)
		aheadN = min(s.off+readAhead, s.end) - ahead
		s.advised = ahead + aheadN
	}
	if s.off-s.dropped >= readAhead {
		drop, dropN = s.dropped, s.off-s.dropped
		s.dropped = s.off
	}
	if aheadN <= 0 && dropN <= 0 {
		return
	}
	_ = s.raw.Control(func(fd uintptr) {
		if aheadN > 0 {
			willNeed(fd, ahead, aheadN)
		}
		if dropN > 0 {
			dontNeed(fd, drop, dropN)
		}
	})
}

// Close drops what is left of the read range. It is called at the end and may
// be called again.
func (s *seqReader) Close() error {
	if s.raw != nil && s.off > s.dropped {
		drop, n := s.dropped, s.off-s.dropped
		s.dropped = s.off
		_ = s.raw.Control(func(fd uintptr) { dontNeed(fd, drop, n) })
	}
	return nil
}
