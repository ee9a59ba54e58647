package busarchive_test

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
)

// A restore over live data verifies the point whole, then reads it again to
// send it. The second read is checked against what the verification read
// (its CRC-32C): bytes that changed in between are refused before the
// entry's end, as damage the first read would have found.
func TestCheckedStreamDataAfterVerifyRefusesBytesThatChanged(t *testing.T) {
	b := checkedArchive(t)
	const name = "streams/A/stream.arc.s2"
	off, size := tartest.DataRange(t, b, name)
	a, err := busarchive.Open(bytes.NewReader(b), int64(len(b))) // reads b as it stands
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(t.Context()); err != nil {
		t.Fatalf("verify: %v", err)
	}

	// Unchanged, the second read gives the entry whole.
	r, err := a.CheckedStreamData(t.Context(), "A")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, b[off:off+size]) {
		t.Fatalf("unchanged: read %d of %d bytes, %v", len(got), size, err)
	}

	// Changed in the store after the verification.
	b[off+size/2] ^= 0x40
	r, err = a.CheckedStreamData(t.Context(), "A")
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(r)
	r.Close()
	if int64(len(got)) >= size {
		t.Fatalf("changed: handed out %d of %d bytes, the end included", len(got), size)
	}
	expectProblems(t, err, problem{name, busarchive.ErrChecksum})
	if want := "read again for the restore, its CRC-32C is"; !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "it changed in the store since") {
		t.Errorf("changed: error %q does not say %q ... it changed in the store since", err, want)
	}
}

// A verification that found an entry damaged vouches for nothing: the
// second read is hashed with SHA-256 against the manifest, as without one.
func TestCheckedStreamDataAfterAFailedVerifyHashesAgain(t *testing.T) {
	b := checkedArchive(t)
	const name = "streams/A/stream.arc.s2"
	off, size := tartest.DataRange(t, b, name)
	b[off+size/3] ^= 0x01
	a, err := busarchive.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(t.Context()); err == nil {
		t.Fatal("verify passed a damaged entry")
	}
	r, err := a.CheckedStreamData(t.Context(), "A")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r)
	r.Close()
	expectProblems(t, err, problem{name, busarchive.ErrChecksum})
	if !strings.Contains(err.Error(), "SHA-256 is") {
		t.Errorf("error %q is not the SHA-256 check against the manifest", err)
	}
}

// An archive checked as it was written (StreamCheck) is not verified whole
// before it is sent: the CRC-32C of the bytes the check took is noted on the
// archive (NoteWritten), and the read for the restore is checked against it.
// The entry as stored reads whole; a byte changed in the store since is
// refused before the entry's end, and named as a change since the check.
func TestCheckedStreamDataAfterNoteWritten(t *testing.T) {
	b := checkedArchive(t)
	const name = "streams/A/stream.arc.s2"
	off, size := tartest.DataRange(t, b, name)
	c := busarchive.NewStreamCheck(t.Context(), "A")
	for p := b[off : off+size]; len(p) > 0; {
		n := min(len(p), 65_537)
		if _, err := c.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	crc := c.CRC()
	if want := crc32.Checksum(b[off:off+size], crc32.MakeTable(crc32.Castagnoli)); crc != want {
		t.Fatalf("the check as written took CRC-32C %08x, the bytes written have %08x", crc, want)
	}
	read := func() ([]byte, error) {
		a, err := busarchive.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		a.NoteWritten("A", crc)
		r, err := a.CheckedStreamData(t.Context(), "A")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return io.ReadAll(r)
	}
	if got, err := read(); err != nil || !bytes.Equal(got, b[off:off+size]) {
		t.Fatalf("unchanged: read %d of %d bytes, %v", len(got), size, err)
	}
	b[off+size/2] ^= 0x08
	got, err := read()
	if int64(len(got)) >= size {
		t.Fatalf("changed: handed out %d of %d bytes, the end included", len(got), size)
	}
	expectProblems(t, err, problem{name, busarchive.ErrChecksum})
	if want := "but it was " + fmt.Sprintf("%08x", crc) + " when it was verified: it changed in the store since"; !strings.Contains(err.Error(), want) {
		t.Errorf("changed: error %q does not say %q", err, want)
	}
}

// A checked read that found an entry whole vouches for it as a verification
// does: a second checked read of the same Archive is held to the CRC-32C of
// the first (a moment's base, read to compose and check the moment's archive,
// then again to send it). A first read stopped part-way vouches for nothing.
func TestCheckedStreamDataAfterACheckedRead(t *testing.T) {
	b := checkedArchive(t)
	const name = "streams/A/stream.arc.s2"
	off, size := tartest.DataRange(t, b, name)
	a, err := busarchive.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	read := func() ([]byte, error) {
		r, err := a.CheckedStreamData(t.Context(), "A")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return io.ReadAll(r)
	}
	// Stopped part-way: nothing noted, so a change is found by its SHA-256.
	r, err := a.CheckedStreamData(t.Context(), "A")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	b[off+size/2] ^= 0x40
	if _, err := read(); err == nil || strings.Contains(err.Error(), "CRC-32C") {
		t.Fatalf("after a read stopped part-way, a changed entry read: %v; want its SHA-256 to refuse it", err)
	}
	b[off+size/2] ^= 0x40
	got, err := read()
	if err != nil || !bytes.Equal(got, b[off:off+size]) {
		t.Fatalf("first whole read: %d of %d bytes, %v", len(got), size, err)
	}
	b[off+size/2] ^= 0x40
	_, err = read()
	expectProblems(t, err, problem{name, busarchive.ErrChecksum})
	if err == nil || !strings.Contains(err.Error(), "read again for the restore, its CRC-32C is") {
		t.Errorf("second read of a changed entry: %v, want it held to the first read's CRC-32C", err)
	}
}
