package spool

import (
	"bytes"
	"context"
	"testing"
)

// A data entry written a megabyte at a time, as a base's chunks are, is
// kept as its first and last keptEdge bytes, and the writer's tail never
// holds more than three edges while it is written.
func TestRecomposedTailStaysSmall(t *testing.T) {
	s := NewRecomposed(nil)
	wr, err := s.Create(context.Background(), "a/bus.tar")
	if err != nil {
		t.Fatal(err)
	}
	w := wr.(*recomposedWriter)
	header := make([]byte, 512)
	w.Hold(0, 512)
	if _, err := w.Write(header); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range 4 {
		chunk[len(chunk)-1] = byte(i + 1)
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if c := cap(w.tail); c > 3*keptEdge {
			t.Fatalf("after %d MiB the tail holds %d bytes of memory, over three edges (%d)", i+1, c, 3*keptEdge)
		}
	}
	if _, err := w.Write([]byte("end")); err != nil {
		t.Fatal(err)
	}
	w.Release()
	last := w.kept[len(w.kept)-1].b
	if len(last) != keptEdge || !bytes.HasSuffix(last, append([]byte{4}, "end"...)) {
		t.Fatalf("the kept tail is %d bytes ending %q, want %d ending with the last chunk's byte and end", len(last), last[max(0, len(last)-4):], keptEdge)
	}
	if w.keptSize > 512+2*keptEdge {
		t.Fatalf("%d bytes kept, want the header and two edges", w.keptSize)
	}
}
