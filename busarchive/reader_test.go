package busarchive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// Open finds the manifest by seeking over the data: it reads the headers and
// manifest.json, not the megabytes of snapshot data.
func TestOpenSeeksOverData(t *testing.T) {
	path := writeSynthArchive(t,
		synth{name: "A", msgs: 1000, size: 4096, seed: 1},
		synth{name: "B", msgs: 1000, size: 4096, consumers: 1, seed: 2})
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	cr := &countingReaderAt{r: f}
	a, err := busarchive.Open(cr, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 4<<20 || cr.n.Load() > 64<<10 {
		t.Fatalf("Open read %d bytes of a %d-byte archive", cr.n.Load(), st.Size())
	}
	if _, err := a.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cr.n.Load() < st.Size()-64<<10 {
		t.Fatalf("Verify read only %d bytes of %d", cr.n.Load(), st.Size())
	}
}

// Verify stops when its context ends and says so.
func TestVerifyHonoursContext(t *testing.T) {
	path := writeSynthArchive(t, synth{name: "A", msgs: 2000, size: 4096, seed: 1}, synth{name: "B", msgs: 10, size: 10, seed: 2})
	a, c, err := busarchive.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := a.Verify(ctx)
	if !errors.Is(err, context.Canceled) || rep == nil {
		t.Fatalf("Verify with an ended context: %v", err)
	}
	for _, r := range rep.Streams {
		if r.Complete {
			t.Fatalf("stream %s reported complete after the context ended", r.Name)
		}
	}
}

// failingReaderAt fails every large read (the data passes of Verify; Open
// reads only headers and the manifest) once armed.
type failingReaderAt struct {
	r     io.ReaderAt
	armed atomic.Bool
	left  atomic.Int32 // large reads that still succeed once armed
}

var errDiskGone = errors.New("the disk went away")

func (f *failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if f.armed.Load() && len(p) >= 64<<10 && f.left.Add(-1) < 0 {
		return 0, errDiskGone
	}
	return f.r.ReadAt(p, off)
}

// A read error part-way through a stream archive stops its verification
// with that error, said once (not also as a decoding problem), and the
// stream is not reported complete.
func TestVerifyReportsAReadErrorOnce(t *testing.T) {
	path := writeSynthArchive(t, synth{name: "A", msgs: 4000, size: 4096, seed: 1})
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	st, _ := file.Stat()
	fr := &failingReaderAt{r: file}
	a, err := busarchive.Open(fr, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	fr.left.Store(3)
	fr.armed.Store(true)
	rep, err := a.Verify(context.Background())
	if !errors.Is(err, errDiskGone) {
		t.Fatalf("Verify over a failing disk: got %v, want an error wrapping %v", err, errDiskGone)
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != 1 {
		t.Errorf("Verify said %d problems, want 1: %v", got, err)
	}
	if !strings.Contains(err.Error(), "verification of streams/A/stream.arc.s2 stopped") {
		t.Errorf("error %q does not say which entry's verification stopped", err)
	}
	if rep == nil || len(rep.Streams) != 1 || rep.Streams[0].Complete {
		t.Errorf("report %+v: want one stream, not complete", rep)
	}
}

// Verifying a file (read with O_DIRECT where the file system allows) and
// the same bytes in memory (read through io.ReaderAt) find the same: every
// entry starts at a 512-byte boundary, rarely at a 4 KiB one, so the direct
// reads start before the entry and must skip what is not its own.
func TestVerifyFileAndMemoryAgree(t *testing.T) {
	path := writeSynthArchive(t,
		synth{name: "A", msgs: 3000, size: 1000, consumers: 2, seed: 1},
		synth{name: "B", msgs: 7, size: 33, seed: 2},
		synth{name: "C", msgs: 1500, size: 3000, consumers: 1, seed: 3})
	fromFile, err := busarchive.VerifyFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := busarchive.Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	fromMemory, err := a.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%+v", *fromFile), fmt.Sprintf("%+v", *fromMemory); got != want {
		t.Errorf("verify of the file: %s\nverify in memory:   %s", got, want)
	}
	for _, s := range fromFile.Streams {
		if !s.Complete {
			t.Errorf("stream %s not complete: %+v", s.Name, s)
		}
	}
}

// StreamData of a file (O_DIRECT where the file system allows, from a
// 512-byte boundary) gives the same bytes as of the same archive in memory.
func TestStreamDataFileAndMemoryAgree(t *testing.T) {
	path := writeSynthArchive(t,
		synth{name: "A", msgs: 2500, size: 1000, consumers: 1, seed: 4},
		synth{name: "B", msgs: 3, size: 10, seed: 5})
	fa, c, err := busarchive.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ma, err := busarchive.Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range fa.Streams() {
		read := func(a *busarchive.Archive) []byte {
			r, err := a.StreamData(s)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		got, want := read(fa), read(ma)
		if !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("stream %s: %d bytes from the file, %d from memory, equal %v", s, len(got), len(want), bytes.Equal(got, want))
		}
	}
}
