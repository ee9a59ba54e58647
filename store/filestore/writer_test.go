package filestore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/store"
)

// An archive's shape, many times over: a header held while the entry's data
// follows (ending in the header's part, the next, or several parts on), its
// size patched in (into the buffer still filling or into the file), then
// released. The file and Commit's Sum are those of the patched bytes, with
// no part held in memory.
func TestWriterHoldsAndPatches(t *testing.T) {
	const ps = store.PartSize
	for _, c := range []struct {
		name  string
		at    []int64 // where each header goes, from the end of the previous entry
		sizes []int   // each entry's data after its header
	}{
		{"one short entry", []int64{1536}, []int{1000}},
		{"patch still in the buffer", []int64{100}, []int{bufSize / 2}},
		{"header in the last block of a part", []int64{ps - 512}, []int{3 * bufSize}},
		{"header at the start of a part", []int64{ps}, []int{ps + 12345}},
		{"header across two parts", []int64{ps - 100}, []int{ps}},
		{"several entries", []int64{512, 7, 0, ps / 3}, []int{2*ps + 1, 5000, ps - 512, 3 * bufSize}},
		{"ends at a part's end", []int64{0}, []int{ps - 512}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.Create(t.Context(), "points/m/l/f1-x/bus.tar")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			rng := rand.New(rand.NewPCG(1, 2))
			var model []byte
			write := func(p []byte) {
				t.Helper()
				for len(p) > 0 {
					k := min(len(p), 1+rng.IntN(300<<10))
					if _, err := w.Write(p[:k]); err != nil {
						t.Fatal(err)
					}
					model, p = append(model, p[:k]...), p[k:]
				}
			}
			random := func(n int) []byte {
				b := make([]byte, n)
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				return b
			}
			for i, at := range c.at {
				write(random(int(at)))
				off := int64(len(model))
				w.Hold(off, 512)
				write(make([]byte, 512))
				write(random(c.sizes[i]))
				hdr := bytes.Repeat([]byte(fmt.Sprint(i)), 512)
				if _, err := w.WriteAt(hdr, off); err != nil {
					t.Fatalf("entry %d: WriteAt at %d: %v", i, off, err)
				}
				copy(model[off:], hdr)
				w.Release()
			}
			write(random(777))
			info, err := w.Commit(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := store.NewChecksum()
			want.Write(model)
			if info.Sum != want.Sum() || info.Size != int64(len(model)) {
				t.Errorf("Commit: %d bytes, sum %s; want %d bytes, %s", info.Size, info.Sum, len(model), want.Sum())
			}
			got, err := os.ReadFile(filepath.Join(s.Dir(), "points/m/l/f1-x/bus.tar"))
			if err != nil || !bytes.Equal(got, model) {
				t.Errorf("the file differs from the patched bytes written (%v)", err)
			}
		})
	}
}

// A writer holds its few buffers however long a hold lasts: the held part
// is not kept in memory.
func TestWriterBuffersBounded(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.newSink("k")
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t.Context(), "k", k)
	defer w.Abort()
	w.Hold(0, 512)
	data := make([]byte, 3*store.PartSize)
	for i := 0; i < len(data); i += 64 << 10 {
		w.Write(data[i : i+64<<10])
	}
	if n := len(w.free) + 1; n > bufCount {
		t.Errorf("%d buffers in use, over %d", n, bufCount)
	}
	w.Release()
	if _, err := w.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}
