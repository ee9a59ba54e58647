package busarchive

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/nats-keeper/nats-keeper/store"
)

// The store's writer and objects are what the archive writes to and reads
// from.
var (
	_ File        = store.Writer(nil)
	_ holder      = store.Writer(nil)
	_ io.ReaderAt = store.Object(nil)
	_ rangeReader = store.Object(nil)
)

// flakyReaderAt reads b, which may be shorter than the size the cache is
// told (a truncated archive), and fails every read that touches [bad, end).
type flakyReaderAt struct {
	b   []byte
	bad int64
}

var errFlaky = errors.New("the read failed")

func (f *flakyReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.bad {
		n := 0
		if off < f.bad {
			n = copy(p, f.b[off:min(f.bad, int64(len(f.b)))])
		}
		return n, errFlaky
	}
	return bytes.NewReader(f.b).ReadAt(p, off)
}

// The scan cache gives every read what the reader itself gives: the same
// bytes, and an error where the reader's read of just those bytes fails.
func TestScanCacheReadsAsItsReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, c := range []struct {
		name string
		r    io.ReaderAt
		size int64
	}{
		{"whole", bytes.NewReader(data), int64(len(data))},
		{"shorter than said", bytes.NewReader(data[:200<<10]), int64(len(data))},
		{"failing from 150 KiB", &flakyReaderAt{b: data, bad: 150 << 10}, int64(len(data))},
		{"empty", bytes.NewReader(nil), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cache := newScanCache(c.r, c.size)
			var off int64
			for i := range 5000 {
				switch rng.IntN(4) {
				case 0: // a jump
					off = rng.Int64N(c.size + 1024)
				case 1: // a seek over some data
					off += rng.Int64N(40 << 10)
				}
				n := []int{1, 511, 512, 1024, 3000, 70 << 10}[rng.IntN(6)]
				if off+int64(n) > c.size { // as the section reader over it clips
					n = int(max(0, c.size-off))
				}
				if n == 0 {
					off = 0
					continue
				}
				want := make([]byte, n)
				wn, werr := c.r.ReadAt(want, off)
				got := make([]byte, n)
				gn, gerr := cache.ReadAt(got, off)
				same := wn == gn && bytes.Equal(want[:wn], got[:gn])
				if wn == n {
					same = same && (gerr == nil || gerr == werr)
				} else {
					same = same && werr != nil && errors.Is(gerr, werr)
				}
				if !same {
					t.Fatalf("read %d: %d bytes at %d: the reader gives %d, %v; the cache %d, %v", i, n, off, wn, werr, gn, gerr)
				}
				off += int64(gn)
			}
		})
	}
}

// countingAt counts the reads made of it.
type countingAt struct {
	r io.ReaderAt
	n int
}

func (c *countingAt) ReadAt(p []byte, off int64) (int, error) {
	c.n++
	return c.r.ReadAt(p, off)
}

// Small reads going on front to back take blocks that double up to 64 KiB.
func TestScanCacheReadsAhead(t *testing.T) {
	data := make([]byte, 1<<20)
	r := &countingAt{r: bytes.NewReader(data)}
	cache := newScanCache(r, int64(len(data)))
	buf := make([]byte, 512)
	for off := int64(0); off < 1<<20; off += 512 {
		if _, err := cache.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	// 8+16+32 KiB, then 64 KiB blocks: 3 + (1 MiB - 56 KiB) / 64 KiB.
	if want := 3 + (1<<20-56<<10+64<<10-1)/(64<<10); r.n != want {
		t.Fatalf("%d reads, want %d", r.n, want)
	}
	r.n = 0
	if _, err := cache.ReadAt(make([]byte, 100<<10), 10); err != nil || r.n != 1 {
		t.Fatalf("a large read: %v, %d reads", err, r.n)
	}
}
