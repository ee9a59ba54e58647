package busarchive

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"

	"github.com/nats-io/nats-server/v2/server/archive"
)

// arcReader reads the entries of a NATSARC1 archive as nats-server's
// archive.Reader (v2.15) does, with its checks and its errors, but keeps one
// header and one name buffer for every entry: archive.Reader allocates four
// times an entry (the name twice, the header twice) and once more to skip
// its payload, some five million times for a GiB of 1 KiB messages, and the
// collector of a keeper held to a small heap paid for each of them.
type arcReader struct {
	r         *bufio.Reader
	hdr       arcHeader
	remaining int64 // of the current entry's headers and payload
	seenMagic bool
	err       error
}

// arcHeader is an entry's header; Name is valid until the next entry.
type arcHeader struct {
	Name        []byte
	Timestamp   int64
	Sequence    uint64
	HeaderSize  int64
	PayloadSize int64
}

// maxArcName is archive.Reader's bound on an entry's name.
const maxArcName = 1 << 20

func newArcReader(r io.Reader) *arcReader {
	return &arcReader{r: bufio.NewReader(r)}
}

// next skips what is left of the current entry and reads the next one's
// header: io.EOF at a clean end (also of an archive shorter than its magic
// bytes, as archive.Reader), archive.ErrInvalidArchive for a damaged one.
// After an error it returns that error again.
func (u *arcReader) next() (*arcHeader, error) {
	if u.err != nil {
		return nil, u.err
	}
	h, err := u.read()
	if err != nil {
		u.err = err
		return nil, err
	}
	return h, nil
}

func (u *arcReader) read() (*arcHeader, error) {
	if u.remaining > 0 {
		_, err := u.r.Discard(int(u.remaining))
		u.remaining = 0
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, archive.ErrInvalidArchive
		}
		if err != nil {
			return nil, err
		}
	}
	if !u.seenMagic {
		var magic [len(archive.MagicBytes)]byte
		if _, err := io.ReadFull(u.r, magic[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, io.EOF
			}
			return nil, err
		}
		if string(magic[:]) != archive.MagicBytes {
			return nil, archive.ErrInvalidArchive
		}
		u.seenMagic = true
	}
	nameLen, err := u.uvarint()
	if err != nil {
		return nil, err // io.EOF here is the archive's clean end
	}
	ts, err := binary.ReadVarint(u.r)
	if err != nil {
		return nil, archive.ErrInvalidArchive
	}
	var f [3]uint64 // sequence, header size, payload size
	for i := range f {
		if f[i], err = u.uvarint(); err != nil {
			return nil, archive.ErrInvalidArchive
		}
	}
	hdrSize, plSize := int64(f[1]), int64(f[2])
	total := hdrSize + plSize
	if nameLen > maxArcName || hdrSize < 0 || plSize < 0 || total < 0 {
		return nil, archive.ErrInvalidArchive
	}
	name := u.hdr.Name[:0]
	if uint64(cap(name)) < nameLen {
		name = make([]byte, nameLen)
	}
	name = name[:nameLen]
	if _, err := io.ReadFull(u.r, name); err != nil {
		return nil, archive.ErrInvalidArchive
	}
	u.hdr = arcHeader{Name: name, Timestamp: ts, Sequence: f[0], HeaderSize: hdrSize, PayloadSize: plSize}
	u.remaining = total
	return &u.hdr, nil
}

// uvarint is archive.Reader's: io.EOF before its first byte, else
// archive.ErrInvalidArchive for one cut short or too long.
func (u *arcReader) uvarint() (uint64, error) {
	v, err := binary.ReadUvarint(u.r)
	if err != nil && !errors.Is(err, io.EOF) {
		return v, archive.ErrInvalidArchive
	}
	return v, err
}

// Read reads the current entry's headers and payload; io.EOF at its end.
func (u *arcReader) Read(p []byte) (int, error) {
	if u.err != nil {
		return 0, u.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if u.remaining == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > u.remaining {
		p = p[:u.remaining]
	}
	n, err := io.ReadFull(u.r, p)
	u.remaining -= int64(n)
	if err != nil {
		u.err = archive.ErrInvalidArchive
		return n, u.err
	}
	return n, nil
}
