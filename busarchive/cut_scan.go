package busarchive

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/nats-io/nats-server/v2/server/archive"
)

// arcScan reads a NATSARC1 archive's entry headers from its decoded bytes,
// given a chunk at a time, skipping the entries' names and payloads, to
// find the first message stamped after a cut (CutWriter).
//
// An entry's header is five varints (name length, timestamp, sequence,
// header size, payload size: the server's archive.Writer), then the name,
// then the payload.
type arcScan struct {
	magic int    // bytes of the magic still to read
	got   []byte // the magic read so far
	skip  int64  // bytes of the current entry's name and payload still to skip
	hb    []byte // the bytes of the header being read
	start int    // where that header began, in the chunk it began in
	here  bool   // it began in the chunk last fed
	ended bool   // the end-of-backup sentinel was read
	held  heldCount
}

// heldCount counts the messages before the cut: how many, their first and
// last sequence, and their bytes as a file and as a memory stream count
// them.
type heldCount struct {
	msgs, first, last uint64
	file, memory      uint64
}

func (c *heldCount) add(h entryHeader) {
	if c.msgs == 0 {
		c.first = h.seq
	}
	c.msgs, c.last = c.msgs+1, h.seq
	c.file += StoredSize(false, int(h.name), int(h.hdr), int(h.size-h.hdr))
	c.memory += StoredSize(true, int(h.name), int(h.hdr), int(h.size-h.hdr))
}

// maxEntryHeader is the most five varints take.
const maxEntryHeader = 5 * binary.MaxVarintLen64

// maxArchiveName is the server's archive reader's bound on a name.
const maxArchiveName = 1 << 20

// pending reports whether a header runs on past the chunk last fed.
func (s *arcScan) pending() bool { return len(s.hb) > 0 }

// feed reads plain, a chunk's decoded bytes. It returns the sequence of
// the first message stamped after cut, 0 when none began; and where its
// header began in plain, or -1 when it began in an earlier chunk (then at
// s.start of the chunk it began in).
func (s *arcScan) feed(plain []byte, cut int64) (int, uint64, error) {
	s.here = false
	i := 0
	if s.magic > 0 {
		n := min(s.magic, len(plain))
		s.got = append(s.got, plain[:n]...)
		s.magic -= n
		if s.magic == 0 && string(s.got) != archive.MagicBytes {
			return 0, 0, errors.New("it is not a NATSARC1 archive")
		}
		i = n
	}
	for i < len(plain) {
		if s.skip > 0 {
			n := min(s.skip, int64(len(plain)-i))
			s.skip -= n
			i += int(n)
			continue
		}
		if s.ended {
			return 0, 0, errors.New("bytes follow its end-of-backup sentinel")
		}
		if len(s.hb) == 0 {
			s.start, s.here = i, true
		}
		began := len(s.hb) > 0 && !s.here
		prev := len(s.hb)
		s.hb = append(s.hb, plain[i:min(len(plain), i+maxEntryHeader-prev)]...)
		h, n, err := parseEntryHeader(s.hb)
		if err != nil {
			return 0, 0, err
		}
		if n == 0 { // it runs on into the next chunk
			return 0, 0, nil
		}
		s.hb = s.hb[:0]
		i += n - prev
		if h.seq != 0 && h.ts > cut {
			if began {
				return -1, h.seq, nil
			}
			return s.start, h.seq, nil
		}
		s.ended = h.seq == 0 && h.ts == 0 && h.name == 0 && h.size == 0
		if h.seq != 0 {
			s.held.add(h)
		}
		s.skip = int64(h.name) + h.size
	}
	return 0, 0, nil
}

// entryHeader is an entry's header as arcScan needs it.
type entryHeader struct {
	name uint64
	ts   int64
	seq  uint64
	size int64 // header and payload
	hdr  int64 // header
}

// parseEntryHeader parses the header at the start of b: its length, 0 when
// b ends before it does.
func parseEntryHeader(b []byte) (entryHeader, int, error) {
	var f [5]uint64
	n := 0
	for k := range f {
		var m int
		if k == 1 {
			var v int64
			v, m = binary.Varint(b[n:])
			f[k] = uint64(v)
		} else {
			f[k], m = binary.Uvarint(b[n:])
		}
		if m == 0 {
			if len(b) >= maxEntryHeader {
				return entryHeader{}, 0, errors.New("an entry's header does not end")
			}
			return entryHeader{}, 0, nil
		}
		if m < 0 {
			return entryHeader{}, 0, errors.New("an entry's header overflows")
		}
		n += m
	}
	hs, ps := int64(f[3]), int64(f[4])
	if f[0] > maxArchiveName || hs < 0 || ps < 0 || hs+ps < 0 {
		return entryHeader{}, 0, fmt.Errorf("an entry declares a name of %d bytes and %d+%d payload bytes", f[0], f[3], f[4])
	}
	return entryHeader{name: f[0], ts: int64(f[1]), seq: f[2], size: hs + ps, hdr: hs}, n, nil
}
