package storetest

import (
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/store"
)

const (
	bigSize = 64 << 20
	// heapBound is how far the heap may grow over its start while a
	// bigSize object is written or read: a few parts, not the object.
	heapBound = 48 << 20
)

// Writing a 64 MiB object through Write keeps the heap within heapBound of
// where it began: a writer holds a few parts, never the object.
func testMemoryWriting(t *testing.T, s store.Store) {
	stop := WatchHeap(t)
	sum := writeRandom(t, s, "points/m/l/f1-big/bus.tar", bigSize)
	growth := stop()
	t.Logf("writing %d MiB, the heap grew by at most %.1f MiB", bigSize>>20, float64(growth)/(1<<20))
	if growth > heapBound {
		t.Errorf("writing %d MiB, the heap grew by %d MiB, over %d MiB: the writer keeps more than a few parts", bigSize>>20, growth>>20, heapBound>>20)
	}
	st, err := s.Stat(t.Context(), "points/m/l/f1-big/bus.tar")
	if err != nil || st.Size != bigSize || st.Sum != "" && st.Sum != sum {
		t.Errorf("Stat after Commit: %+v, %v", st, err)
	}
}

// Reading a 64 MiB object through Reader keeps the heap within heapBound of
// where it began, and reads the bytes that were written.
func testMemoryReading(t *testing.T, s store.Store) {
	key := "points/m/l/f1-big/bus.tar"
	sum := writeRandom(t, s, key, bigSize)
	stop := WatchHeap(t)
	o, err := s.Open(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	r, err := o.Reader(t.Context(), 0, o.Size())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := store.NewChecksum()
	n, err := io.CopyBuffer(c, r, make([]byte, 1<<20))
	growth := stop()
	if err != nil || n != bigSize || c.Sum() != sum {
		t.Fatalf("read %d bytes of %d, %v; their sum %s, the written %s", n, bigSize, err, c.Sum(), sum)
	}
	t.Logf("reading %d MiB, the heap grew by at most %.1f MiB", bigSize>>20, float64(growth)/(1<<20))
	if growth > heapBound {
		t.Errorf("reading %d MiB, the heap grew by %d MiB, over %d MiB: the reader keeps more than a few parts", bigSize>>20, growth>>20, heapBound>>20)
	}
}

// writeRandom commits size random bytes at key, made 1 MiB at a time, and
// returns their checksum.
func writeRandom(t *testing.T, s store.Store, key string, size int) string {
	t.Helper()
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	rng := rand.NewChaCha8([32]byte{'b', 'i', 'g'})
	chunk := make([]byte, 1<<20)
	c := store.NewChecksum()
	for done := 0; done < size; done += len(chunk) {
		rng.Read(chunk)
		c.Write(chunk)
		if _, err := w.Write(chunk); err != nil {
			t.Fatalf("writing %s at %d: %v", key, done, err)
		}
	}
	info, err := w.Commit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Sum != c.Sum() {
		t.Fatalf("Commit's sum %s is not NewChecksum's over the bytes, %s", info.Sum, c.Sum())
	}
	return c.Sum()
}

// WatchHeap samples the bytes in heap objects until stop is called, which
// returns the peak's growth over the start (for memory tests of what writes
// or reads through a store, such as agecrypt's). The collector runs at GOGC=10
// meanwhile, so that garbage does not pass for memory held.
func WatchHeap(t *testing.T) (stop func() uint64) {
	old := debug.SetGCPercent(10)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	runtime.GC()
	base := heapObjects()
	peak := make(chan uint64)
	done := make(chan struct{})
	go func() {
		top := base
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			top = max(top, heapObjects())
			select {
			case <-done:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-peak - base
	}
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
