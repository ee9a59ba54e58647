package filestore_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/store/filestore"
)

const benchSize = 256 << 20

// BenchmarkWrite writes a 256 MiB archive-shaped file (a 512-byte header
// patched at the end, random data in 128 KiB writes as a snapshot arrives),
// durably, through the store and through today's busarchive.DirectFile path
// (O_DIRECT, fsync, rename, fsync the directory).
func BenchmarkWrite(b *testing.B) {
	src := make([]byte, 16<<20)
	rand.NewChaCha8([32]byte{'b'}).Read(src)
	hdr := make([]byte, 512)
	b.Run("store", func(b *testing.B) {
		dir := b.TempDir()
		s, err := filestore.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		const key = "points/m/l/f1-x/bus.tar"
		b.SetBytes(benchSize)
		defer reportCPU(b)()
		for b.Loop() {
			w, err := s.Create(b.Context(), key)
			if err != nil {
				b.Fatal(err)
			}
			w.Write(hdr)
			w.Hold(512, 512)
			feed(b, w, hdr, src)
			if _, err := w.WriteAt(hdr, 512); err != nil {
				b.Fatal(err)
			}
			w.Release()
			if _, err := w.Commit(b.Context()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.Remove(filepath.Join(dir, key))
			b.StartTimer()
		}
	})
	b.Run("DirectFile", func(b *testing.B) {
		dir := b.TempDir()
		b.SetBytes(benchSize)
		defer reportCPU(b)()
		for b.Loop() {
			tmp, path := filepath.Join(dir, ".bus.tar.tmp"), filepath.Join(dir, "bus.tar")
			f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			var out interface {
				busarchive.File
				Sync() error
			} = f
			df := busarchive.NewDirectFile(f)
			if df != nil {
				out = df
			}
			out.Write(hdr)
			feed(b, out, hdr, src)
			if _, err := out.WriteAt(hdr, 512); err != nil {
				b.Fatal(err)
			}
			if err := out.Sync(); err != nil {
				b.Fatal(err)
			}
			if df != nil {
				df.Close()
			}
			f.Close()
			if err := os.Rename(tmp, path); err != nil {
				b.Fatal(err)
			}
			syncDir(b, dir)
			b.StopTimer()
			os.Remove(path)
			b.StartTimer()
		}
	})
}

// feed writes the header that is patched later, benchSize-1536 bytes of src
// cycled in 128 KiB writes, and a 512-byte tail.
func feed(b *testing.B, w io.Writer, hdr, src []byte) {
	if _, err := w.Write(hdr); err != nil {
		b.Fatal(err)
	}
	const chunk = 128 << 10
	for rest := benchSize - 1536; rest > 0; {
		off := rest % len(src)
		n := min(chunk, rest, len(src)-off)
		if _, err := w.Write(src[off : off+n]); err != nil {
			b.Fatal(fmt.Errorf("writing with %d bytes to go: %w", rest, err))
		}
		rest -= n
	}
	if _, err := w.Write(hdr); err != nil {
		b.Fatal(err)
	}
}

func syncDir(b *testing.B, dir string) {
	d, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		b.Fatal(err)
	}
}

// reportCPU reports the CPU time (user and system, every goroutine's) per
// operation, which a machine shared with other work disturbs less than the
// wall time. Call the function it returns when the loop is done.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/1e6/float64(b.N), "cpu-ms/op") }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
