package busarchive

import (
	"bytes"
	"context"
	"testing"
)

// BenchmarkDecodeStream decodes a snapshot of 100,000 messages of 1 KiB,
// as a verification and the check of an archive as it is written do; its
// allocations a message are what the collector has to keep up with.
func BenchmarkDecodeStream(b *testing.B) {
	const n = 100_000
	entries := []arcEntry{stateEntry(1, n, n, 1), consumerEntry("c")}
	for seq := uint64(1); seq <= n; seq++ {
		entries = append(entries, arcEntry{name: "orders.eu.created", ts: int64(seq), seq: seq, hdrLen: 0, plLen: 1024})
	}
	raw := compress(arcBytes(b, append(entries, endEntry)...))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		d := decodeStream(context.Background(), "S", bytes.NewReader(raw), func() bool { return false })
		if !d.rep.Complete || d.rep.Messages != n {
			b.Fatalf("decoded %+v", d.rep)
		}
	}
}
