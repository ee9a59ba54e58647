package natsstore

import (
	"context"
	"io"
	"os"
	"strconv"
	"testing"
)

// BenchmarkRead reads an object of $NATSSTORE_BENCH_MIB MiB (default 64)
// front to back through Reader, as a verification or a restore does, from
// a single embedded server, and reports MB/s. No timing is asserted.
func BenchmarkRead(b *testing.B) {
	mib := 64
	if v, err := strconv.Atoi(os.Getenv("NATSSTORE_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	js := single(b)
	s := open(b, js, "bench", Options{})
	ctx := context.Background()
	size := int64(mib) << 20
	if _, err := put(b, ctx, s, "points/a/b/f1-x/bus.tar", newPattern(3, size)); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(size)
	for b.Loop() {
		o, err := s.Open(ctx, "points/a/b/f1-x/bus.tar")
		if err != nil {
			b.Fatal(err)
		}
		r, err := o.Reader(ctx, 0, size)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, r, buf)
		if err != nil || n != size {
			b.Fatalf("read %d of %d: %v", n, size, err)
		}
		r.Close()
		o.Close()
	}
}
