package busarchive

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server/archive"
)

// BumpLastSeq is r (a stream.arc.s2) with its head's last_seq raised to last
// (unchanged when it is already at or above it): streaming, rewriting only
// the head, whatever the archive's size.
//
// The server's restore pads the stream with skipped sequences up to the
// head's last_seq (see the head's fields in streamarc.go), so the restored
// stream's last sequence is last and its next message gets last+1. A head
// with first_seq 0 (an empty stream that never had a message) gets first_seq
// last+1 too, as the server writes an empty stream whose sequence advanced:
// the server refuses first_seq 0 with any other last_seq. Nothing else of
// the head changes, its other fields kept in their order.
//
// How it costs only the head: an s2 stream (klauspost s2, the framing of
// snappy's framing_format.txt) is a stream identifier and then chunks, each
// a type byte, a 3-byte length and the body; a data chunk's body is the CRC
// of its own decoded bytes and a block compressed with no reference to any
// other chunk (s2 Reader.Read decodes each chunk on its own), and s2 readers,
// the server's included, read one stream's chunks after another's as one.
// So the chunks that hold state.json (the first one, unless the head is
// large) are decoded, their CRCs checked, and encoded again as a stream of
// their own with the new state.json; every later chunk is passed through
// byte for byte (the s2 index chunk, whose offsets would no longer hold, is
// dropped: a plain read skips it anyway). The decoded bytes after state.json
// in those first chunks are encoded again as they were.
//
// Memory: the head's chunks, at most maxBumpHead bytes read before
// state.json ends. A read fails with an error when the archive is not a
// stream archive, or its head is not one the server restores once bumped.
func BumpLastSeq(r io.Reader, last uint64) io.Reader {
	return &bumpReader{src: r, last: last}
}

// maxBumpHead bounds what BumpLastSeq reads and holds before state.json has
// ended (one chunk more at most, of at most maxChunkLen): a state.json at its
// bound spans at most 17 chunks of s2's smallest block (4 KiB), and one
// chunk of the default 1 MiB block or the largest, 4 MiB.
const maxBumpHead = 8 << 20

// The s2 framing's bounds (klauspost s2, s2.go).
const (
	maxChunkLen   = 1<<24 - 1 // a 3-byte length
	maxBlockLen   = 4 << 20   // the most a data chunk decodes to
	chunkCompress = 0x00
	chunkPlain    = 0x01
	chunkIndex    = 0x99
	chunkStreamID = 0xff
)

type bumpReader struct {
	src  io.Reader
	last uint64
	out  io.Reader // what follows once the head is decided
	err  error
}

func (b *bumpReader) Read(p []byte) (int, error) {
	if b.out == nil && b.err == nil {
		b.out, b.err = b.start()
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.out.Read(p)
}

// start reads the chunks holding state.json and decides what is read out.
func (b *bumpReader) start() (io.Reader, error) {
	var raw, plain []byte // the chunks as read; their decoded bytes
	for {
		chunk, decoded, err := readChunk(b.src, len(raw) == 0)
		if err != nil {
			return nil, fmt.Errorf("the stream archive's head does not read, so its last sequence was not raised: %w", err)
		}
		raw = append(raw, chunk...)
		plain = append(plain, decoded...)
		h, err := parseStateEntry(plain)
		if err != nil {
			return nil, fmt.Errorf("the stream archive's head does not read, so its last sequence was not raised: %w", err)
		}
		if h != nil {
			return b.decide(raw, plain, h)
		}
		if len(raw) > maxBumpHead {
			return nil, fmt.Errorf("the stream archive's state.json does not end within its first %d bytes, so its last sequence was not raised", maxBumpHead)
		}
	}
}

// decide is the archive read out: as it was when its head is at or above
// last, else with the head bumped.
func (b *bumpReader) decide(raw, plain []byte, h *headEntry) (io.Reader, error) {
	var st snapState
	if err := json.Unmarshal(plain[h.json:h.end], &st); err != nil {
		return nil, fmt.Errorf("the stream archive's state.json does not decode, so its last sequence was not raised: %w", err)
	}
	if st.LastSeq >= b.last {
		return io.MultiReader(bytes.NewReader(raw), b.src), nil
	}
	var first uint64 // kept
	if st.FirstSeq == 0 {
		first = b.last + 1
	}
	js, err := setHeadSeqs(plain[h.json:h.end], b.last, first)
	if err == nil {
		err = checkBumped(js, b.last)
	}
	if err != nil {
		return nil, fmt.Errorf("the stream archive's head cannot be raised to last sequence %d, so it was not: %w", b.last, err)
	}
	head, err := encodeHead(h.ts, js, plain[h.end:])
	if err != nil {
		return nil, fmt.Errorf("the stream archive's new head could not be encoded: %w", err)
	}
	return io.MultiReader(bytes.NewReader(head), &chunkPass{src: b.src}), nil
}

// checkBumped checks the new state.json decodes to last and is a head the
// server restores.
func checkBumped(js []byte, last uint64) error {
	var st snapState
	if err := json.Unmarshal(js, &st); err != nil {
		return err
	}
	if st.LastSeq != last {
		return fmt.Errorf("the new head reads last sequence %d", st.LastSeq)
	}
	h := headOf(&st, nil)
	if err := checkHeadSeqs(*h); err != nil {
		return fmt.Errorf("the head %w", err)
	}
	return nil
}

// encodeHead is a whole s2 stream: the archive's magic, state.json (js) as
// the server writes it, then rest, the decoded bytes that followed it in
// the chunks read.
func encodeHead(ts int64, js, rest []byte) ([]byte, error) {
	var out bytes.Buffer
	zw := s2.NewWriter(&out, s2.WriterConcurrency(1))
	aw := archive.NewWriter(zw)
	err := aw.WriteHeader(&archive.Header{Name: "state.json", Timestamp: ts, PayloadSize: int64(len(js))})
	if err == nil {
		_, err = aw.Write(js)
	}
	if err == nil {
		_, err = zw.Write(rest)
	}
	if err = errors.Join(err, zw.Close()); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// readChunk reads one s2 chunk whole: its bytes as read and, for a data
// chunk, its decoded bytes with its CRC checked. The first chunk must be
// the stream identifier.
func readChunk(r io.Reader, first bool) (chunk, decoded []byte, err error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, nil, fmt.Errorf("s2 chunk header: %w", noEOF(err))
	}
	typ, n := h[0], int(h[1])|int(h[2])<<8|int(h[3])<<16
	if first && typ != chunkStreamID {
		return nil, nil, errors.New("it does not begin with an s2 stream identifier")
	}
	if (typ == chunkCompress || typ == chunkPlain) && n > s2.MaxEncodedLen(maxBlockLen)+4 {
		return nil, nil, fmt.Errorf("an s2 data chunk of %d bytes is over the bound of a block", n)
	}
	chunk = make([]byte, 4+n) // n < 16 MiB by its 3 bytes
	copy(chunk, h[:])
	if _, err := io.ReadFull(r, chunk[4:]); err != nil {
		return nil, nil, fmt.Errorf("s2 chunk of %d bytes: %w", n, noEOF(err))
	}
	body := chunk[4:]
	switch {
	case typ == chunkStreamID:
		if string(body) != "S2sTwO" && string(body) != "sNaPpY" {
			return nil, nil, errors.New("its s2 stream identifier is not one")
		}
		return chunk, nil, nil
	case typ == chunkCompress || typ == chunkPlain:
		decoded, err = decodeChunk(typ, body)
		return chunk, decoded, err
	case typ < 0x80:
		return nil, nil, fmt.Errorf("s2 chunk type %#x is not one a reader may skip", typ)
	}
	return chunk, nil, nil // padding and skippable chunks
}

// errBlockCRC is an s2 block whose decoded bytes fail their CRC.
var errBlockCRC = errors.New("an s2 block fails its CRC")

// decodeChunk decodes a data chunk's body, its CRC checked, as s2's Reader
// does.
func decodeChunk(typ byte, body []byte) ([]byte, error) {
	return decodeChunkInto(nil, typ, body)
}

// decodeChunkInto is decodeChunk decoding a compressed block into buf
// where it is large enough (it is reused from chunk to chunk); the bytes
// returned are buf's, or body's for an uncompressed block.
func decodeChunkInto(buf *[]byte, typ byte, body []byte) ([]byte, error) {
	if len(body) < 4 {
		return nil, errors.New("an s2 data chunk is too short for its CRC")
	}
	sum, block := binary.LittleEndian.Uint32(body), body[4:]
	decoded := block
	if typ == chunkCompress {
		n, err := s2.DecodedLen(block)
		if err != nil {
			return nil, fmt.Errorf("s2 block: %w", err)
		}
		if n > maxBlockLen {
			return nil, fmt.Errorf("an s2 block decodes to %d bytes, over the bound of %d", n, maxBlockLen)
		}
		dst := make([]byte, n)
		if buf != nil {
			if cap(*buf) < n {
				*buf = make([]byte, n)
			}
			dst = (*buf)[:n]
		}
		if decoded, err = s2.Decode(dst, block); err != nil {
			return nil, fmt.Errorf("s2 block: %w", err)
		}
	} else if len(decoded) > maxBlockLen {
		return nil, fmt.Errorf("an s2 block holds %d bytes, over the bound of %d", len(decoded), maxBlockLen)
	}
	if maskedCRC(decoded) != sum {
		return nil, errBlockCRC
	}
	return decoded, nil
}

// maskedCRC is the framing format's checksum of a chunk's decoded bytes
// (castagnoli is reread.go's CRC-32C table).
func maskedCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b)
	return c>>15 | c<<17 + 0xa282ead8
}

// noEOF is io.ErrUnexpectedEOF for io.EOF: the archive ended inside its
// head.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
