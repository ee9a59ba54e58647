package busarchive

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// A key index's encoding, version 1, every integer a varint (signed for a
// time, unsigned else), offsets and sequences as the difference from the
// one before:
//
//	magic "NKKEYIDX", version
//	stream name (length, bytes), size, plain, first sequence, last sequence
//	chunk count, then per chunk: offset (times two, plus one for an
//	  uncompressed chunk), decoded offset
//	message count, then per message: sequence, time, offset, length,
//	  subject (length, bytes), header (length, bytes), data sum (32 bytes),
//	  entry sum (32 bytes)
//	SHA-256 of all the bytes before it (32 bytes)
//
// DecodeKeyIndex checks the whole SHA-256 first, then every count and
// length against what is left and against the bounds before it allocates,
// and each message's entry sum against its fields.
const (
	keyIndexMagic   = "NKKEYIDX"
	keyIndexVersion = 1
	// minIndexedMessage is the fewest bytes a message takes encoded: six
	// one-byte varints and two sums.
	minIndexedMessage = 6 + 64
)

// Encode is the index's encoding; its error wraps ErrIndexOver when it
// would be over MaxKeyIndexSize.
func (ix *KeyIndex) Encode() ([]byte, error) {
	var b bytes.Buffer
	var v [binary.MaxVarintLen64]byte
	uv := func(x uint64) { b.Write(v[:binary.PutUvarint(v[:], x)]) }
	str := func(s []byte) { uv(uint64(len(s))); b.Write(s) }
	b.WriteString(keyIndexMagic)
	uv(keyIndexVersion)
	str([]byte(ix.Stream))
	uv(uint64(ix.Size))
	uv(uint64(ix.Plain))
	uv(ix.FirstSeq)
	uv(ix.LastSeq)
	uv(uint64(len(ix.Chunks)))
	var prev IndexChunk
	for _, c := range ix.Chunks {
		raw := uint64(0)
		if c.Raw {
			raw = 1
		}
		uv(uint64(c.Off-prev.Off)<<1 | raw)
		uv(uint64(c.Plain - prev.Plain))
		prev = c
	}
	uv(uint64(len(ix.Messages)))
	var seq uint64
	for _, m := range ix.Messages {
		uv(m.Seq - seq)
		b.Write(v[:binary.PutVarint(v[:], m.Time)])
		uv(uint64(m.Off))
		uv(uint64(m.Len))
		str([]byte(m.Subject))
		str(m.Header)
		b.Write(m.DataSum[:])
		b.Write(m.Sum[:])
		seq = m.Seq
		if b.Len() > MaxKeyIndexSize {
			return nil, fmt.Errorf("%w: its encoding is over %d bytes", ErrIndexOver, MaxKeyIndexSize)
		}
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	if b.Len() > MaxKeyIndexSize || len(ix.Messages) > MaxKeyIndexMessages || len(ix.Chunks) > MaxKeyIndexChunks {
		return nil, fmt.Errorf("%w: %d bytes, %d messages, %d chunks", ErrIndexOver, b.Len(), len(ix.Messages), len(ix.Chunks))
	}
	return b.Bytes(), nil
}

// keyIndexEntry names a key index in the problems DecodeKeyIndex reports.
const keyIndexEntry = "key index"

// DecodeKeyIndex decodes an index Encode wrote. Its error is an
// *EntryError: ErrTooLarge over the bounds, ErrChecksum when its SHA-256 or
// an entry's sum does not match, ErrFormat when it does not decode.
func DecodeKeyIndex(data []byte) (*KeyIndex, error) {
	if len(data) > MaxKeyIndexSize {
		return nil, &EntryError{Entry: keyIndexEntry, Kind: ErrTooLarge, Detail: fmt.Sprintf("it is %d bytes, over the bound of %d", len(data), MaxKeyIndexSize)}
	}
	if len(data) < len(keyIndexMagic)+sha256.Size || string(data[:len(keyIndexMagic)]) != keyIndexMagic {
		return nil, &EntryError{Entry: keyIndexEntry, Kind: ErrFormat, Detail: "it does not begin with " + keyIndexMagic}
	}
	body, tail := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], tail) {
		return nil, &EntryError{Entry: keyIndexEntry, Kind: ErrChecksum, Detail: fmt.Sprintf("its SHA-256 is %x but it ends with %x", sum, tail)}
	}
	d := &indexDecoder{b: body[len(keyIndexMagic):]}
	ix, err := d.index()
	if err != nil {
		return nil, err
	}
	if len(d.b) != 0 {
		return nil, &EntryError{Entry: keyIndexEntry + " of stream " + printable(ix.Stream), Kind: ErrFormat, Detail: fmt.Sprintf("%d bytes follow its last message", len(d.b))}
	}
	return ix, nil
}
