package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"testing"
	"time"
)

// Blocks read, seek, write out, hash and patch as the bytes they hold.
func TestBlocks(t *testing.T) {
	data := randomBytes(7, 2500)
	b := Blocks{data[:1000], data[1000:2000], data[2000:]}
	if b.Len() != len(data) || b.Sum() != sha256.Sum256(data) || !bytes.Equal(b.Bytes(), data) {
		t.Fatal("Len, Sum or Bytes differ from the bytes")
	}
	r := NewBlocksReader(b)
	got, err := io.ReadAll(io.LimitReader(r, 1500))
	if err != nil || !bytes.Equal(got, data[:1500]) {
		t.Fatalf("the first 1500 bytes: %v", err)
	}
	if off, err := r.Seek(-700, io.SeekCurrent); err != nil || off != 800 {
		t.Fatalf("Seek back: %d, %v", off, err)
	}
	var out bytes.Buffer
	if n, err := r.WriteTo(&out); err != nil || n != 1700 || !bytes.Equal(out.Bytes(), data[800:]) {
		t.Fatalf("WriteTo from 800: %d, %v", n, err)
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read at the end: %d, %v", n, err)
	}
	if off, _ := r.Seek(0, io.SeekStart); off != 0 {
		t.Fatal("Seek to the start")
	}
	if got, _ := io.ReadAll(r); !bytes.Equal(got, data) {
		t.Fatal("a read from the start after a seek differs")
	}
	patch := bytes.Repeat([]byte{'P'}, 300)
	if n := b.copyAt(patch, 900); n != 300 {
		t.Fatalf("copyAt across two blocks copied %d", n)
	}
	copy(data[900:], patch) // the blocks are data's own bytes
	into := Blocks{make([]byte, 1200), make([]byte, 1300)}
	if err := into.Fill(bytes.NewReader(data)); err != nil || !bytes.Equal(into.Bytes(), data) {
		t.Fatalf("Fill: %v", err)
	}
}

// A part writer whose sink keeps up holds the part being stored and what of
// the next part has filled, not two whole parts: the stored part's blocks
// are taken back as soon as the next part needs a block.
func TestPartWriterReusesBlocksEarly(t *testing.T) {
	const ps = 4 * BlockSize
	sink := newMemSink(t, ps)
	w := newPartWriter(context.Background(), "k", sink, ps)
	data := randomBytes(8, 3*ps)
	for i := range 3 {
		if _, err := w.Write(data[i*ps : (i+1)*ps]); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); w.fly != nil && len(w.fly.done) == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the part was not stored in a minute")
			}
		}
	}
	if _, err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.bytes(), data) {
		t.Fatal("the committed bytes differ")
	}
	if w.peak > w.perPart {
		t.Fatalf("%d blocks of %d bytes were held at once, over one part's %d", w.peak, w.blockSize, w.perPart)
	}
}
