package busarchive_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// keepArc records the last message of each arc.* subject, every one of
// arc.c.*.
func keepArc(subject string) busarchive.KeepMode {
	switch {
	case strings.HasPrefix(subject, "arc.c."):
		return busarchive.KeepEvery
	case strings.HasPrefix(subject, "arc."):
		return busarchive.KeepLast
	}
	return busarchive.KeepNone
}

// TestKeyIndexOfWrittenArchive: an archive of StreamArchiveWriter's, with
// a consumer entry, gaps, headers and an empty body, indexes and reads back.
func TestKeyIndexOfWrittenArchive(t *testing.T) {
	data := writeArc(t, arcHead(1), arcMessages())
	ix, err := buildIndex(t, arcStream, data, keepArc)
	if err != nil {
		t.Fatal(err)
	}
	_, want := wholeRead(t, data, keepArc)
	reads := 0
	got, err := readIndexed(ix, rangeOf(data, &reads))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("%d messages read through the index, %d by a whole read; want 3 (arc.b 2, arc.c.d 5, arc.a 8)", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || !bytes.Equal(got[i].Data, want[i].Data) || !bytes.Equal(got[i].Header, want[i].Header) {
			t.Fatalf("message %d: read %d, want %d", i, got[i].Seq, want[i].Seq)
		}
	}
}

// TestIndexerGivesUp: an index over its bounds, or of bytes that are no
// stream archive, is not built, and says why; the bytes written are taken
// all the same.
func TestIndexerGivesUp(t *testing.T) {
	long := "arc." + strings.Repeat("x", 5000)
	msgs := []busarchive.ArchivedMessage{{Seq: 1, Time: 1, Subject: long, Data: []byte("v")}}
	data := writeArc(t, busarchive.ArchiveHead{FirstSeq: 1, LastSeq: 1, Msgs: 1}, msgs)
	if _, err := buildIndex(t, arcStream, data, keepArc); !errors.Is(err, busarchive.ErrIndexOver) {
		t.Fatalf("an index of a %d-byte subject: %v, want ErrIndexOver", len(long), err)
	}
	good := writeArc(t, arcHead(0), arcMessages())
	garbage := make([]byte, 3<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(r.Uint32())
	}
	garbage[0] = 0xff // an s2 stream identifier's type, and then garbage
	for name, b := range map[string][]byte{
		"garbage":   garbage,
		"truncated": good[:len(good)-9],
		"empty":     nil,
		"no s2":     []byte("NATSARC1"),
	} {
		if ix, err := buildIndex(t, arcStream, b, keepArc); err == nil {
			t.Fatalf("%s: an index of %d messages was built", name, len(ix.Messages))
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestIndexerStopDoesNotBlock: once stopped, writes are dropped without
// waiting, however many.
func TestIndexerStopDoesNotBlock(t *testing.T) {
	x := busarchive.NewIndexer(arcStream, keepArc)
	x.Write(writeArc(t, arcHead(0), arcMessages())[:20])
	x.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 1<<20)
		for range 64 {
			x.Write(b)
		}
		x.Close()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("writes after Stop wait")
	}
	if _, err := x.Index(); err == nil {
		t.Fatal("a stopped indexer returns an index")
	}
}

// BenchmarkIndexer is the indexer's pace over a snapshot of 64 MiB of
// random values, every one recorded (so hashed).
func BenchmarkIndexer(b *testing.B) {
	s := synth{name: "KV_b", msgs: 640, size: 100 << 10, seed: 3}
	var buf bytes.Buffer
	if err := s.writeData(&buf); err != nil {
		b.Fatal(err)
	}
	keep := func(subject string) busarchive.KeepMode { return busarchive.KeepLast }
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if _, err := buildIndex(b, "KV_b", buf.Bytes(), keep); err != nil {
			b.Fatal(err)
		}
	}
}
