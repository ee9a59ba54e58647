package store

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
)

// An object's checksum (Info.Sum) is the SHA-256 of the concatenated
// SHA-256s of its PartSize parts, in order, written as hex. An empty object
// has no parts: its checksum is the SHA-256 of nothing. Hashing per part lets
// a writer finish a part's hash when the part is final, in any order, so a
// part kept back by Hold is hashed as it is committed, with bounded memory.
// `split -b 8M` and `sha256sum` reproduce it by hand.

// CombineSums is the checksum of an object whose parts have the given
// SHA-256s, in order.
func CombineSums(parts [][32]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Checksum computes an object's checksum from its bytes written in order.
type Checksum struct {
	part  hash.Hash
	n     int64 // bytes in the current part
	parts [][32]byte
}

// NewChecksum starts a checksum.
func NewChecksum() *Checksum { return &Checksum{part: sha256.New()} }

// Write hashes p; it never fails.
func (c *Checksum) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		room := PartSize - c.n
		take := int64(len(p))
		if take > room {
			take = room
		}
		c.part.Write(p[:take])
		c.n += take
		p = p[take:]
		if c.n == PartSize {
			c.endPart()
		}
	}
	return total, nil
}

func (c *Checksum) endPart() {
	var s [32]byte
	copy(s[:], c.part.Sum(nil))
	c.parts = append(c.parts, s)
	c.part.Reset()
	c.n = 0
}

// Sum is the checksum of everything written so far.
func (c *Checksum) Sum() string {
	parts := c.parts
	if c.n > 0 {
		var s [32]byte
		copy(s[:], c.part.Sum(nil))
		parts = append(parts[:len(parts):len(parts)], s)
	}
	return CombineSums(parts)
}
