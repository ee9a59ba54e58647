package busarchive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
)

// An archive in an object store, written through a File that uploads in
// parts: Hold, Release, and no Sync.

// openVerifyReport opens and verifies the archive r holds.
func openVerifyReport(t *testing.T, r io.ReaderAt, size int64) (*busarchive.Report, error) {
	t.Helper()
	a, err := busarchive.Open(r, size)
	if err != nil {
		return nil, err
	}
	return a.Verify(context.Background())
}

// partFile is a File as a store.Writer is: written in order, with no Sync,
// and WriteAt allowed only inside the one range it holds, which it keeps
// back from its parts until Release.
type partFile struct {
	b              []byte
	held           bool
	holdOff, holdN int64
	holds          []int64
	releases       int
	misuse         []string
}

func (f *partFile) Write(p []byte) (int, error) {
	f.b = append(f.b, p...)
	return len(p), nil
}

func (f *partFile) WriteAt(p []byte, off int64) (int, error) {
	if !f.held || off < f.holdOff || off+int64(len(p)) > f.holdOff+f.holdN || off+int64(len(p)) > int64(len(f.b)) {
		f.misuse = append(f.misuse, fmt.Sprintf("WriteAt of %d bytes at %d outside the held %d+%d", len(p), off, f.holdOff, f.holdN))
		return 0, errors.New("outside the held range")
	}
	return copy(f.b[off:], p), nil
}

func (f *partFile) Hold(off, n int64) {
	if f.held {
		f.misuse = append(f.misuse, "a second Hold")
	}
	if off < int64(len(f.b)) {
		f.misuse = append(f.misuse, fmt.Sprintf("Hold at %d of bytes already written (%d)", off, len(f.b)))
	}
	f.held, f.holdOff, f.holdN = true, off, n
	f.holds = append(f.holds, off)
}

func (f *partFile) Release() {
	if !f.held {
		f.misuse = append(f.misuse, "Release without Hold")
	}
	f.held = false
	f.releases++
}

// The writer holds each data entry's tar header while the entry is
// written, patches it inside the hold and releases it, and commits without
// Sync; the archive is the one a file gets.
func TestWriterHoldsOnlyTheHeaderItPatches(t *testing.T) {
	long := strings.Repeat("L", 200) // a name that needs a PAX header before the entry's own
	streams := []synth{
		{name: "A", msgs: 300, size: 100, consumers: 1, seed: 1},
		{name: long, msgs: 3, size: 10, seed: 2},
		{name: "C", msgs: 50, size: 1000, seed: 3},
	}
	f := &partFile{}
	w := busarchive.NewWriter(f, busarchive.WriterInfo{KeeperVersion: "test", ServerVersion: "2.15.3", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	for _, s := range streams {
		if _, err := s.feed(w); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(f.misuse) > 0 || f.held || len(f.holds) != 3 || f.releases != 3 {
		t.Fatalf("holds at %v, %d releases, held at the end %v, misuse %q", f.holds, f.releases, f.held, f.misuse)
	}
	for i, s := range streams {
		off, _ := tartest.DataRange(t, f.b, busarchive.DataEntry(s.name))
		if f.holds[i] != off-512 {
			t.Errorf("stream %d: held %d, its data entry's header is at %d", i, f.holds[i], off-512)
		}
	}
	if _, err := openVerifyReport(t, bytes.NewReader(f.b), int64(len(f.b))); err != nil {
		t.Fatal(err)
	}
	fileBytes := mustRead(t, writeSynthArchive(t, streams...))
	if !bytes.Equal(f.b, fileBytes) {
		t.Fatalf("the archive written through parts (%d bytes) differs from the file's (%d)", len(f.b), len(fileBytes))
	}
}
