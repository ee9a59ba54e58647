package busarchive_test

import (
	"bytes"
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
