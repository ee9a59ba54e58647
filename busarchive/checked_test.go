package busarchive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
)

// checkedArchive writes an archive whose stream A spans several verification
// blocks, and returns its bytes.
func checkedArchive(t *testing.T) []byte {
	t.Helper()
	path := writeSynthArchive(t,
		synth{name: "A", msgs: 4000, size: 1000, consumers: 1, seed: 7},
		synth{name: "B", msgs: 3, size: 10, seed: 8})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openBoth opens b as a file (read with O_DIRECT where the file system
// allows) and from memory.
func openBoth(t *testing.T, b []byte) map[string]*busarchive.Archive {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bus.tar")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fa, c, err := busarchive.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ma, err := busarchive.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*busarchive.Archive{"file": fa, "memory": ma}
}

func TestCheckedStreamDataGivesTheEntry(t *testing.T) {
	b := checkedArchive(t)
	for how, a := range openBoth(t, b) {
		for _, s := range a.Streams() {
			off, size := tartest.DataRange(t, b, "streams/"+s+"/stream.arc.s2")
			r, err := a.CheckedStreamData(t.Context(), s)
			if err != nil {
				t.Fatalf("%s %s: %v", how, s, err)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("%s %s: read: %v", how, s, err)
			}
			if want := b[off : off+size]; !bytes.Equal(got, want) {
				t.Errorf("%s %s: got %d bytes, want the entry's %d", how, s, len(got), len(want))
			}
			if n, err := r.Read(make([]byte, 10)); n != 0 || err != io.EOF {
				t.Errorf("%s %s: a read after the end gave %d, %v", how, s, n, err)
			}
			if err := r.Close(); err != nil {
				t.Errorf("%s %s: close: %v", how, s, err)
			}
			if err := r.Close(); err != nil {
				t.Errorf("%s %s: second close: %v", how, s, err)
			}
		}
	}
}

// A damaged entry is never handed out to its end: the reader fails with its
// checksum problem before the last bytes, so a restore fed from it cannot
// complete.
func TestCheckedStreamDataWithholdsTheEndOfADamagedEntry(t *testing.T) {
	good := checkedArchive(t)
	const name = "streams/A/stream.arc.s2"
	off, size := tartest.DataRange(t, good, name)
	for _, at := range []struct {
		what string
		pos  int64
	}{{"middle", size / 2}, {"near the end", size - 40}, {"first block", 100}} {
		b := bytes.Clone(good)
		b[off+at.pos] ^= 0x01
		for how, a := range openBoth(t, b) {
			r, err := a.CheckedStreamData(t.Context(), "A")
			if err != nil {
				t.Fatalf("%s %s: %v", at.what, how, err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err == nil {
				t.Fatalf("%s %s: the damaged entry was read whole without an error", at.what, how)
			}
			if int64(len(got)) >= size || !bytes.Equal(got, b[off:off+int64(len(got))]) {
				t.Errorf("%s %s: handed out %d of %d bytes (want a prefix, short of the end)", at.what, how, len(got), size)
			}
			expectProblems(t, err, problem{name, busarchive.ErrChecksum})
		}
	}
}

func TestCheckedStreamDataChecksBackupJSONFirst(t *testing.T) {
	b := checkedArchive(t)
	off, size := tartest.DataRange(t, b, "streams/A/backup.json")
	i := bytes.Index(b[off:off+size], []byte(`"subjects"`))
	b[off+int64(i)+1] ^= 0x20 // still the same JSON to Go, not the same bytes
	for how, a := range openBoth(t, b) {
		r, err := a.CheckedStreamData(t.Context(), "A")
		if r != nil {
			r.Close()
		}
		expectProblems(t, err, problem{"streams/A/backup.json", busarchive.ErrChecksum})
		if _, err := a.CheckedStreamData(t.Context(), "nope"); !errors.Is(err, busarchive.ErrNoStream) {
			t.Errorf("%s: a stream the archive lacks: %v", how, err)
		}
	}
}

func TestCheckedStreamDataStopsWithItsContext(t *testing.T) {
	b := checkedArchive(t)
	for how, a := range openBoth(t, b) {
		ctx, cancel := context.WithCancel(t.Context())
		r, err := a.CheckedStreamData(ctx, "A")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(make([]byte, 1000)); err != nil {
			t.Fatalf("%s: first read: %v", how, err)
		}
		cancel()
		_, err = io.ReadAll(r)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: after the context ended: %v", how, err)
		}
		r.Close()
	}
}

func TestProblemsFindsWrappedProblems(t *testing.T) {
	e1 := &busarchive.EntryError{Entry: "a", Kind: busarchive.ErrChecksum, Detail: "x"}
	e2 := &busarchive.EntryError{Entry: "b", Kind: busarchive.ErrFormat, Detail: "y"}
	err := fmt.Errorf("restore: %w", fmt.Errorf("read: %w", errors.Join(e1, errors.New("other"), e2)))
	got := busarchive.Problems(err)
	if len(got) != 2 || got[0] != e1 || got[1] != e2 {
		t.Errorf("Problems = %v, want [%v %v]", got, e1, e2)
	}
	if got := busarchive.Problems(errors.New("plain")); len(got) != 0 {
		t.Errorf("Problems of a plain error = %v", got)
	}
}
