package busarchive_test

import (
	"context"
	"errors"
	"io"
	"os"
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
