package jsbus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/s2"
)

// A stream's snapshot is an s2 stream: its state, then one entry per
// consumer, then its messages. nats-server's restore reads it through an s2
// decoder, which takes in a whole block (up to 1 MiB as the server writes
// them, so a couple of thousand consumers' entries) before the restore
// makes the consumers in it, one by one, each with files of its own; all
// that while the server's read loop waits in the pipe write of the chunk
// that came next, and the server gives the whole restore up as stalled when
// that write takes 5 s (processStreamRestore's activityInterval,
// nats-server 2.15.3). Measured on an embedded server right after the
// stream was deleted: 900 consumers held one chunk for 3.2 s (2,000 failed
// a restore in the benchmark). So before the keeper sends a snapshot with
// consumers, it cuts its start (the state and, as far as paceLead reaches,
// the consumers' entries) into blocks of paceBlock, and sends those in
// chunks of paceChunk: each write the server waits in then covers a few
// dozen consumers (the same 900: no chunk waited over 0.6 s). The rest of the stream goes
// as it was, its chunks copied unchanged. Nothing is decoded beyond the
// start, and the decoded bytes are the same, so what the server restores is
// the same.
const (
	paceBlock = 8 << 10 // decoded bytes of an s2 block of the re-cut start
	paceChunk = 4 << 10 // bytes of a restore chunk over the re-cut start
	// paceEntry is more than a consumer's entry usually takes decoded (its
	// configuration and state as JSON); one with a long list of pending
	// messages takes more, and the consumers past paceLead then go in the
	// server's own blocks.
	paceEntry   = 4 << 10
	paceLeadMax = 8 << 20
	// s2's framing (Snappy's framing format): a chunk header is a type byte
	// and a 3-byte little-endian length; a data chunk begins with the
	// masked CRC-32C of its decoded bytes.
	s2Compressed   = 0x00
	s2Uncompressed = 0x01
	s2Identifier   = 0xff
	s2MaxBlock     = 4 << 20
)

// paceLead is how many decoded bytes at the start of a snapshot with this
// many consumers are re-cut.
func paceLead(consumers int) int {
	if consumers <= 0 {
		return 0
	}
	return min(64<<10+consumers*paceEntry, paceLeadMax)
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

func s2CRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoliTable)
	return c>>15 | c<<17 + 0xa282ead8
}

// errNotS2 is the reason a snapshot's start could not be re-cut.
var errNotS2 = errors.New("not an s2 stream")

// paceStart reads the s2 stream r up to lead decoded bytes (whole chunks)
// and returns the same stream with that start cut into blocks of
// paceBlock, and how many bytes the re-cut start takes. A start that does
// not read as s2 is given back as it was (start 0), with the reason: the
// server then judges the stream as it would have.
func paceStart(r io.Reader, lead int) (io.Reader, int, error) {
	var raw, out bytes.Buffer
	rest := func(err error) (io.Reader, int, error) {
		return io.MultiReader(bytes.NewReader(raw.Bytes()), r), 0, err
	}
	var hdr [4]byte
	var decoded []byte // decoded bytes not yet cut into a block
	total := 0
	for first := true; total < lead; first = false {
		if raw.Len() > 2*paceLeadMax {
			return rest(fmt.Errorf("%w: over %d bytes before %d bytes of data", errNotS2, 2*paceLeadMax, lead))
		}
		k, err := io.ReadFull(r, hdr[:])
		raw.Write(hdr[:k])
		if errors.Is(err, io.EOF) && !first {
			break
		}
		if err != nil {
			return rest(fmt.Errorf("%w: a chunk header: %w", errNotS2, err))
		}
		typ, n := hdr[0], int(hdr[1])|int(hdr[2])<<8|int(hdr[3])<<16
		if first && typ != s2Identifier {
			return rest(fmt.Errorf("%w: it does not begin with a stream identifier", errNotS2))
		}
		if typ >= 0x02 && typ <= 0x7f {
			return rest(fmt.Errorf("%w: a reserved chunk type %#x", errNotS2, typ))
		}
		if n > s2MaxBlock+s2MaxBlock/8 {
			return rest(fmt.Errorf("%w: a chunk of %d bytes, more than a block takes", errNotS2, n))
		}
		at := raw.Len()
		if _, err := io.CopyN(&raw, r, int64(n)); err != nil {
			return rest(fmt.Errorf("%w: a chunk of %d bytes: %w", errNotS2, n, err))
		}
		body := raw.Bytes()[at:]
		switch typ {
		case s2Identifier:
			if m := string(body); m != "S2sTwO" && m != "sNaPpY" {
				return rest(fmt.Errorf("%w: a stream identifier %.16q", errNotS2, m))
			}
			if first {
				out.Write(raw.Bytes())
			}
			continue
		case s2Compressed, s2Uncompressed:
		default:
			continue // padding and skippable chunks carry no data
		}
		if len(body) < 4 {
			return rest(fmt.Errorf("%w: a data chunk of %d bytes", errNotS2, len(body)))
		}
		data := body[4:]
		if typ == s2Compressed {
			size, err := s2.DecodedLen(data)
			if err != nil || size > s2MaxBlock {
				return rest(fmt.Errorf("%w: a block that does not decode (%d bytes, %v)", errNotS2, size, err))
			}
			if data, err = s2.Decode(make([]byte, size), data); err != nil {
				return rest(fmt.Errorf("%w: a block that does not decode: %w", errNotS2, err))
			}
		} else if len(data) > s2MaxBlock {
			return rest(fmt.Errorf("%w: an uncompressed block of %d bytes", errNotS2, len(data)))
		}
		if s2CRC(data) != binary.LittleEndian.Uint32(body[:4]) {
			return rest(fmt.Errorf("%w: a block whose checksum does not match", errNotS2))
		}
		decoded = append(decoded, data...)
		total += len(data)
		for len(decoded) >= paceBlock {
			writeBlock(&out, decoded[:paceBlock])
			decoded = decoded[paceBlock:]
		}
	}
	if len(decoded) > 0 {
		writeBlock(&out, decoded)
	}
	return io.MultiReader(bytes.NewReader(out.Bytes()), r), out.Len(), nil
}

// writeBlock writes b as one s2 data chunk: compressed, or as it is when
// compressing does not make it smaller.
func writeBlock(out *bytes.Buffer, b []byte) {
	body := s2.Encode(nil, b)
	typ := byte(s2Compressed)
	if len(body) >= len(b) {
		typ, body = s2Uncompressed, b
	}
	n := 4 + len(body)
	out.Write([]byte{typ, byte(n), byte(n >> 8), byte(n >> 16)})
	out.Write(binary.LittleEndian.AppendUint32(nil, s2CRC(b)))
	out.Write(body)
}

// pacedReader reads at most small bytes at a time while fewer than lead
// bytes were read, and then as much as asked.
type pacedReader struct {
	r     io.Reader
	small int
	lead  int
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if p.lead > 0 {
		b = b[:min(len(b), p.small, p.lead)]
	}
	n, err := p.r.Read(b)
	p.lead -= n
	return n, err
}
