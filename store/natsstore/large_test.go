package natsstore

import (
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/store"
)

// heapPeak samples the heap every 20 ms until stop is called, which returns
// the largest growth over the heap in use when it began.
func heapPeak() (stop func() uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base, peak := m.HeapAlloc, m.HeapAlloc
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapAlloc)
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak - base
	}
}

// TestLargeObjectR3 writes a 1 GiB object to an R3 bucket on a three-node
// cluster and reads it back whole, with the heap growing well under 128 MiB.
// The cluster runs in a child process (this test binary), so the heap is the
// client's alone: in this process the three servers' own buffers for R3
// (raft entries, outbound queues) take 250-330 MiB of it.
func TestLargeObjectR3(t *testing.T) {
	const size = 1 << 30
	js := clusterProcess(t)
	s := open(t, js, "vault", Options{Replicas: 3})
	if s.replicas != 3 {
		t.Fatalf("the bucket has %d replicas", s.replicas)
	}
	ctx := testCtx(t, 10*time.Minute)
	stop := heapPeak()

	start := time.Now()
	written := store.NewChecksum()
	info, err := put(t, ctx, s, "big", io.TeeReader(newPattern(42, size), written))
	if err != nil {
		t.Fatal(err)
	}
	wrote := time.Since(start)
	if info.Size != size || info.Sum != written.Sum() {
		t.Fatalf("commit: %+v, want %d bytes with sum %s", info, int64(size), written.Sum())
	}

	start = time.Now()
	o, err := s.Open(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	r, err := o.Reader(ctx, 0, o.Size())
	if err != nil {
		t.Fatal(err)
	}
	read := store.NewChecksum()
	n, err := io.Copy(read, r)
	r.Close()
	o.Close()
	if err != nil || n != size || read.Sum() != info.Sum {
		t.Fatalf("read back %d bytes with sum %s, %v; want %d with %s", n, read.Sum(), err, int64(size), info.Sum)
	}
	readTook := time.Since(start)
	peak := stop()
	t.Logf("1 GiB on R3: write %v (%.0f MB/s), read %v (%.0f MB/s), peak heap growth %d MiB",
		wrote.Round(time.Millisecond), size/wrote.Seconds()/1e6, readTook.Round(time.Millisecond),
		size/readTook.Seconds()/1e6, peak>>20)
	if peak > 64<<20 {
		t.Fatalf("the heap grew by %d MiB, over 64 MiB", peak>>20)
	}
}
