package busarchive

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// A key index lets a reader take single messages out of a stream archive
// (stream.arc.s2) without reading it whole: where each of the s2 stream's
// data chunks lies and where its decoded bytes begin (the framing), and,
// for each message a caller chose by its subject, where its archive entry
// lies in the decoded bytes and the SHA-256s that check a read of it.
//
// It is built as the archive's bytes are written (Indexer,
// keyindex_build.go), encoded in a compact versioned form with a hard bound
// (keyindex_encode.go), and read through (ReadIndexed, keyindex_read.go):
// one ranged read of the chunks that hold a message, those chunks decoded,
// the one entry decoded and checked against what the index recorded.
//
// The index holds subjects, headers and sums, never a message's data.

// KeepMode says which messages of a subject an index records.
type KeepMode uint8

const (
	// KeepNone: the subject's messages are not recorded.
	KeepNone KeepMode = iota
	// KeepLast: only the subject's last message (a KV key, an object's meta).
	KeepLast
	// KeepEvery: every message of the subject (an object's chunks).
	KeepEvery
)

// Bounds on a key index: an index over them is not built (the Indexer gives
// it up) and is refused by the decoder, so a caller falls back to reading
// the archive whole.
const (
	// MaxKeyIndexMessages bounds the messages one index records.
	MaxKeyIndexMessages = 1 << 20
	// MaxKeyIndexChunks bounds the s2 chunks one index records: a 1 TiB
	// archive (MaxDataSize) in chunks of s2's default block (1 MiB).
	MaxKeyIndexChunks = 1 << 20
	// MaxKeyIndexSize bounds an encoded index, in bytes.
	MaxKeyIndexSize = 64 << 20
	// maxIndexedHeader bounds one recorded message's header block.
	maxIndexedHeader = 64 << 10
	// maxIndexedSubject bounds one recorded subject.
	maxIndexedSubject = 4 << 10
	// maxIndexedPlain bounds what an indexed archive decodes to (4 PiB),
	// so that no sum of offsets overflows.
	maxIndexedPlain = int64(1) << 52
)

// KeyIndex is the key index of one stream's archive.
type KeyIndex struct {
	Stream string
	// Size is the bytes of stream.arc.s2 the index was built over (the
	// data entry's size); Plain what they decode to.
	Size, Plain int64
	// FirstSeq and LastSeq are the archive's head's (state.json's).
	FirstSeq, LastSeq uint64
	// Chunks are the s2 stream's data chunks, in order.
	Chunks []IndexChunk
	// Messages are the messages recorded, in rising sequence order.
	Messages []IndexedMessage
}

// IndexChunk is one s2 data chunk: where its chunk header lies in the data
// entry, and where its decoded bytes begin in the decoded archive. Raw says
// it is an uncompressed chunk (s2 stores a block it cannot compress so):
// its decoded bytes are its own, after its header and CRC, so a message
// that lies inside it is read alone, without the rest of the chunk.
type IndexChunk struct {
	Off, Plain int64
	Raw        bool
}

// rawChunkHead is an uncompressed chunk's bytes before its data: its type
// and length, and its CRC.
const rawChunkHead = 8

// IndexedMessage is one message a key index records.
type IndexedMessage struct {
	Seq     uint64
	Time    int64 // unix ns
	Subject string
	Header  []byte // the stored header block, nil when none
	// Off and Len are where the message's archive entry lies in the
	// decoded archive: its fields, its subject, its header and its data.
	Off, Len int64
	DataSum  [32]byte // SHA-256 of its data
	Sum      [32]byte // entrySum of the above: checks a read of it
}

// entrySum is the SHA-256 over a message's sequence, time, subject, header
// and the SHA-256 of its data, each length-prefixed.
func entrySum(seq uint64, t int64, subject string, header []byte, dataSum [32]byte) [32]byte {
	h := sha256.New()
	var b [binary.MaxVarintLen64]byte
	h.Write([]byte("nats-keeper key index entry\x00"))
	h.Write(b[:binary.PutUvarint(b[:], seq)])
	h.Write(b[:binary.PutVarint(b[:], t)])
	h.Write(b[:binary.PutUvarint(b[:], uint64(len(subject)))])
	h.Write([]byte(subject))
	h.Write(b[:binary.PutUvarint(b[:], uint64(len(header)))])
	h.Write(header)
	h.Write(dataSum[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// IndexedReadError is a message read through a key index that is not what
// the index recorded: the archive's bytes in its range, or the index,
// changed. Kind is ErrChecksum (it decoded, to something else) or ErrFormat
// (it did not decode).
type IndexedReadError struct {
	Stream string
	Seq    uint64
	Kind   error
	Detail string
}

func (e *IndexedReadError) Error() string {
	return fmt.Sprintf("stream %s, message %d read through its key index: %v: %s", e.Stream, e.Seq, e.Kind, e.Detail)
}

func (e *IndexedReadError) Unwrap() error { return e.Kind }

// chunkOf is the index in ix.Chunks of the chunk holding decoded offset
// plain (the last chunk whose decoded bytes begin at or before it).
func (ix *KeyIndex) chunkOf(plain int64) int {
	lo, hi := 0, len(ix.Chunks)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ix.Chunks[mid].Plain <= plain {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}

// chunkEnd is where chunk i ends in the data entry: where the next data
// chunk begins, or the entry's end.
func (ix *KeyIndex) chunkEnd(i int) int64 {
	if i+1 < len(ix.Chunks) {
		return ix.Chunks[i+1].Off
	}
	return ix.Size
}
