package busarchive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"runtime/metrics"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// maxFuzzAlloc bounds what one Open+Verify of a fuzz input may allocate in
// all: the decoders' fixed buffers (a few MiB) plus what the input holds.
const maxFuzzAlloc = 128 << 20

// FuzzOpenVerify feeds Open and Verify arbitrary archives. They must never
// panic, must return every problem as an *EntryError of a known kind, and
// must not allocate without bound. CI runs it for a short fixed time:
//
//	go test ./busarchive -run '^$' -fuzz FuzzOpenVerify -fuzztime 60s -fuzzminimizetime 3s
//
// (the default minimization time of 60 s per new input makes a short run
// look stalled).
func FuzzOpenVerify(f *testing.F) {
	g, err := os.ReadFile(goldenPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(g)
	f.Add(g[:len(g)/2])
	f.Add(g[:len(g)-1024])
	flipped := bytes.Clone(g)
	flipped[600] ^= 0xff // inside the first stream.arc.s2
	f.Add(flipped)
	synthPath := writeSynthArchive(f, synth{name: "S", msgs: 5, size: 20, consumers: 1, seed: 9})
	s, err := os.ReadFile(synthPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "manifest.json", Linkname: "/etc/passwd"})
	tw.Close()
	f.Add(buf.Bytes())
	f.Add([]byte{})

	kinds := []error{busarchive.ErrIncomplete, busarchive.ErrChecksum, busarchive.ErrLayout, busarchive.ErrFormat, busarchive.ErrTooLarge, busarchive.ErrMismatch}
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4<<20 {
			return
		}
		metrics.Read(sample)
		before := sample[0].Value.Uint64()
		a, err := busarchive.Open(bytes.NewReader(b), int64(len(b)))
		if err == nil {
			if a.Manifest() == nil {
				t.Fatal("Open succeeded without a manifest")
			}
			var rep *busarchive.Report
			rep, err = a.Verify(context.Background())
			if rep == nil {
				t.Fatal("Verify returned no report")
			}
		}
		metrics.Read(sample)
		if n := sample[0].Value.Uint64() - before; n > maxFuzzAlloc {
			t.Fatalf("Open+Verify of %d bytes allocated %d bytes", len(b), n)
		}
		if err == nil {
			return
		}
		ps := busarchive.Problems(err)
		if len(ps) == 0 {
			t.Fatalf("an error without an *EntryError: %v", err)
		}
		for _, p := range ps {
			known := false
			for _, k := range kinds {
				known = known || errors.Is(p, k)
			}
			if !known {
				t.Fatalf("a problem of unknown kind: %v", p)
			}
		}
	})
}
