package busarchive

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"hash/crc32"
)

// A restore with the kept data live verifies the point whole (Verify) before
// anything live is removed, then reads each stream's data again to send it
// (CheckedStreamData). The second read need not be hashed with SHA-256 again:
// Verify notes the CRC-32C of every data entry it found matching the
// manifest, and a later CheckedStreamData of the same Archive checks the bytes
// it reads against that CRC instead, so that what the server is sent is what
// was verified, at a small fraction of SHA-256's CPU (about 1 GiB/s of SHA-256
// against tens of GiB/s of CRC-32C here). The CRC guards against the bytes
// changing between the two reads (a store or disk that returns something
// else the second time); the SHA-256 the first read matched against the
// sealed manifest is what ties them to the point.
//
// An archive checked as it was written (StreamCheck) is not read whole
// before it is sent either: its writer notes the CRC-32C of the bytes the
// check held to the manifest (NoteWritten) on the Archive it then opens, and
// CheckedStreamData checks against that as after a Verify.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// verifyHash is Verify's hash of a data entry: SHA-256, and CRC-32C beside it.
// Sum is the SHA-256's.
type verifyHash struct {
	hash.Hash
	crc hash.Hash32
}

func newVerifyHash() *verifyHash {
	return &verifyHash{Hash: sha256.New(), crc: crc32.New(castagnoli)}
}

func (h *verifyHash) Write(p []byte) (int, error) {
	h.crc.Write(p)
	return h.Hash.Write(p)
}

// noteVerified notes that stream's data entry read whole (or was checked as
// written) and matched the manifest, with the CRC-32C of what was read.
func (a *Archive) noteVerified(stream string, crc uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verified == nil {
		a.verified = map[string]uint32{}
	}
	a.verified[stream] = crc
}

// NoteWritten notes that the data entry of stream was checked as it was
// written (a StreamCheck whose Hold found it whole and matching its manifest
// entry) and that crc (StreamCheck.CRC) is the CRC-32C of the bytes written:
// a later CheckedStreamData of a reads the entry checked against crc instead
// of hashing it with SHA-256. Note only what this process checked as it
// wrote it, on an archive whose sealed manifest is the one the check held
// the stream to.
func (a *Archive) NoteWritten(stream string, crc uint32) { a.noteVerified(stream, crc) }

// verifiedCRC is the CRC-32C noted by a Verify that found stream's data whole.
func (a *Archive) verifiedCRC(stream string) (uint32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	crc, ok := a.verified[stream]
	return crc, ok
}

// crcProblems compares a second read of an entry (n bytes, CRC-32C in h) with
// what the verification read.
func crcProblems(e EntrySum, n int64, h hash.Hash32, want uint32) []error {
	var out []error
	if n != e.Size {
		out = append(out, &EntryError{Entry: e.Name, Kind: ErrChecksum, Detail: fmt.Sprintf("read %d bytes, the manifest declares %d", n, e.Size)})
	}
	if got := h.Sum32(); got != want {
		out = append(out, &EntryError{Entry: e.Name, Kind: ErrChecksum,
			Detail: fmt.Sprintf("read again for the restore, its CRC-32C is %08x, but it was %08x when it was verified: it changed in the store since", got, want)})
	}
	return out
}
