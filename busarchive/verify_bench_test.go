package busarchive_test

import (
	"context"
	"os"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// BenchmarkVerify1KiB verifies a 128 MiB archive of 1 KiB random messages,
// the message size of the benchmark: per-message decoding costs most
// here.
func BenchmarkVerify1KiB(b *testing.B) {
	path := writeSynthArchive(b, synth{name: "SMALLMSG", msgs: 128 << 10, size: 1 << 10, consumers: 1, seed: 9})
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ResetTimer()
	for range b.N {
		rep, err := busarchive.VerifyFile(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Streams[0].Complete {
			b.Fatalf("report %+v", rep.Streams[0])
		}
	}
}
