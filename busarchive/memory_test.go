package busarchive_test

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// heapBound is the most Go heap writing and verifying an archive of any size
// may use: the bound.
const heapBound = 32 << 20

// bigSynth is about 256 MiB of incompressible snapshot data: 32768 messages
// of 8 KiB random payload, with two consumers.
var bigSynth = synth{name: "BIG", msgs: 32768, size: 8 << 10, consumers: 2, seed: 42}

// peakHeap runs fn while a sampler watches the bytes of live and not yet
// collected heap objects, and returns the highest figure seen. It runs
// under a soft memory limit of heapBound, as the keeper runs under one of
// its own (serve --memory-limit): the figure includes garbage, and without
// a limit a collector starved of CPU (the package's tests beside others on
// two cores) lets garbage grow the heap to twice its goal: 33-35 MiB were
// seen writing an archive whose writer holds about 16.
func peakHeap(t testing.TB, fn func()) uint64 {
	t.Helper()
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(heapBound))
	runtime.GC() // twice: the first moves sync.Pool contents to the victim cache, the second frees them
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// writeVerifyBig writes bigSynth into a new archive and verifies it, and
// returns the archive's size and the peak heap of each half.
func writeVerifyBig(t testing.TB) (size int64, writePeak, verifyPeak uint64) {
	t.Helper()
	var path string
	writePeak = peakHeap(t, func() { path = writeSynthArchive(t, bigSynth) })
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	verifyPeak = peakHeap(t, func() {
		rep, err := busarchive.VerifyFile(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		if r := rep.Streams[0]; !r.Complete || r.Messages != bigSynth.msgs {
			t.Fatalf("report %+v", r)
		}
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	return st.Size(), writePeak, verifyPeak
}

// TestMemoryBound writes and verifies a 256 MiB archive and holds the Go heap
// (the archive writer, the synthetic snapshot's s2 encoder feeding it, the
// verifier and everything else in the test process) under 32 MiB.
func TestMemoryBound(t *testing.T) {
	size, w, v := writeVerifyBig(t)
	t.Logf("archive %d MiB; peak heap writing %.1f MiB, verifying %.1f MiB", size>>20, float64(w)/(1<<20), float64(v)/(1<<20))
	if size < 256<<20 {
		t.Fatalf("the archive is only %d bytes", size)
	}
	if w > heapBound || v > heapBound {
		t.Fatalf("peak heap %d bytes writing, %d verifying; the bound is %d", w, v, heapBound)
	}
}

// BenchmarkWriteVerify256MiB reports throughput and the peak heap of writing
// and verifying a 256 MiB archive.
func BenchmarkWriteVerify256MiB(b *testing.B) {
	for i := 0; i < b.N; i++ {
		start := time.Now()
		size, w, v := writeVerifyBig(b)
		b.SetBytes(size)
		b.ReportMetric(float64(w)/(1<<20), "MiB-peak-heap-write")
		b.ReportMetric(float64(v)/(1<<20), "MiB-peak-heap-verify")
		b.Logf("%d MiB in %v", size>>20, time.Since(start))
	}
}
