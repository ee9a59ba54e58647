package agecrypt

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// The age payload (age spec, "Payload"): the plaintext in chunks of
// ChunkSize, each sealed with ChaCha20-Poly1305 under a key derived from
// the file key and the 16-byte nonce that follows the header; a chunk's
// nonce is its index (11 bytes, big-endian) and a last-chunk flag byte.
const (
	ChunkSize  = 64 << 10
	overhead   = chacha20poly1305.Overhead
	encChunk   = ChunkSize + overhead
	nonceSize  = 16 // the payload nonce after the header
	fileKeyLen = 16
)

// payloadAEAD is the payload's cipher for a file key and the payload nonce.
func payloadAEAD(fileKey, nonce []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, fileKey, nonce, "payload", chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("deriving the payload key: %w", err)
	}
	return chacha20poly1305.New(key)
}

// chunkNonce is chunk i's nonce.
func chunkNonce(i int64, last bool) []byte {
	var n [chacha20poly1305.NonceSize]byte
	binary.BigEndian.PutUint64(n[3:11], uint64(i))
	if last {
		n[11] = 1
	}
	return n[:]
}

// plainSize is the plaintext's size for a payload of n bytes, and whether
// n is a size a payload can have.
func plainSize(n int64) (int64, bool) {
	if n < overhead {
		return 0, false
	}
	chunks := (n + encChunk - 1) / encChunk
	last := n - (chunks-1)*encChunk
	if last < overhead || (last == overhead && chunks > 1) {
		return 0, false
	}
	return n - chunks*overhead, true
}
