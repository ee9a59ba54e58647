package busarchive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

func TestSynthRoundTrip(t *testing.T) {
	a := synth{name: "ORDERS", msgs: 300, size: 700, consumers: 2, seed: 1}
	long := synth{name: strings.Repeat("L", 200), msgs: 3, size: 10, seed: 2} // needs a PAX name
	empty := synth{name: "EMPTY", seed: 3}
	path := writeSynthArchive(t, a, long, empty)

	// Any tar reader sees exactly the layout, in order, with manifest.json last.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o600 {
			t.Fatalf("%s: type %q mode %o", h.Name, h.Typeflag, h.Mode)
		}
		names = append(names, h.Name)
	}
	want := []string{
		"streams/ORDERS/stream.arc.s2", "streams/ORDERS/backup.json",
		busarchive.DataEntry(long.name), busarchive.MetaEntry(long.name),
		"streams/EMPTY/stream.arc.s2", "streams/EMPTY/backup.json", "manifest.json",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("entries %q, want %q", names, want)
	}

	ar, c, err := busarchive.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := ar.Manifest()
	if m.Format != 1 || m.KeeperVersion != "test" || m.ServerVersion != "2.15.3" || m.Created.IsZero() || m.Seal == "" {
		t.Fatalf("manifest header %+v", m)
	}
	if got := strings.Join(ar.Streams(), ","); got != "ORDERS,"+long.name+",EMPTY" {
		t.Fatalf("streams %s", got)
	}
	st := m.Stream("ORDERS").State
	if st.Msgs != 300 || st.FirstSeq != 1 || st.LastSeq != 300 || st.Consumers != 2 || m.Stream("ORDERS").Config.Name != "ORDERS" {
		t.Fatalf("ORDERS state %+v", st)
	}
	rep, err := ar.Verify(context.Background())
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if len(rep.Streams) != 3 || rep.Bytes != m.Bytes() {
		t.Fatalf("report %+v, manifest bytes %d", rep, m.Bytes())
	}
	if r := rep.Streams[0]; r.Name != "ORDERS" || r.Messages != 300 || r.Consumers != 2 || r.FirstSeq != 1 || r.LastSeq != 300 || !r.Complete {
		t.Fatalf("ORDERS report %+v", r)
	}
	if r := rep.Streams[2]; r.Messages != 0 || !r.Complete {
		t.Fatalf("EMPTY report %+v", r)
	}

	// The section readers give the entries byte for byte.
	meta, err := ar.StreamMeta("ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(meta)
	if !bytes.Equal(got, a.meta()) {
		t.Fatalf("backup.json differs")
	}
	var buf bytes.Buffer
	if err := a.writeData(&buf); err != nil {
		t.Fatal(err)
	}
	data, err := ar.StreamData("ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(data)
	if !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("stream.arc.s2 differs: %d bytes, want %d", len(got), buf.Len())
	}
	if _, err := ar.StreamData("NOPE"); !errors.Is(err, busarchive.ErrNoStream) {
		t.Fatalf("StreamData of a missing stream: %v", err)
	}
}

// Closing both writers (as jsm.go does even when the snapshot fails) commits
// nothing: without Finish and Commit the archive has no manifest.
func TestCloseDoesNotCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bus.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := busarchive.NewWriter(f, busarchive.WriterInfo{})
	s := synth{name: "S", msgs: 10, size: 10}
	sw, err := w.Stream("S")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.writeData(sw.Data()); err != nil {
		t.Fatal(err)
	}
	sw.Meta().Write(s.meta())
	sw.Data().Close()
	sw.Meta().Close()
	if _, err := sw.Data().Write([]byte("late")); err == nil {
		t.Fatal("a write after Close was taken")
	}
	if _, err := w.Commit(); err == nil {
		t.Fatal("Commit with an unfinished stream succeeded")
	}
	sw.Abort()
	if _, err := sw.Finish(); err == nil {
		t.Fatal("Finish after Abort succeeded")
	}
	if _, err := w.Commit(); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("Commit after Abort: %v", err)
	}
	if _, err := w.Stream("T"); err == nil {
		t.Fatal("a new stream after Abort was started")
	}
	_, err = busarchive.VerifyFile(context.Background(), path)
	if !errors.Is(err, busarchive.ErrIncomplete) {
		t.Fatalf("verify of an uncommitted archive: %v", err)
	}
}

// A stream without backup.json (jsm.go writes it only on success) is refused
// at Finish, and so is a backup.json for another stream.
func TestFinishRefusesBadMeta(t *testing.T) {
	for name, meta := range map[string][]byte{
		"empty":   nil,
		"garbage": []byte("{not json"),
		"other":   synth{name: "OTHER"}.meta(),
	} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "bus.tar"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w := busarchive.NewWriter(f, busarchive.WriterInfo{})
			sw, _ := w.Stream("S")
			synth{name: "S", msgs: 1, size: 1}.writeData(sw.Data())
			sw.Meta().Write(meta)
			if _, err := sw.Finish(); err == nil {
				t.Fatal("Finish took a bad backup.json")
			}
			if _, err := w.Commit(); err == nil {
				t.Fatal("Commit after a failed Finish succeeded")
			}
		})
	}
}

// Data written from another goroutine while the caller waits, as jsm.go's
// subscription callback does, lands whole.
func TestDataFromAnotherGoroutine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bus.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := busarchive.NewWriter(f, busarchive.WriterInfo{})
	s := synth{name: "S", msgs: 2000, size: 100, consumers: 1}
	sw, err := w.Stream("S")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.writeData(&buf); err != nil {
		t.Fatal(err)
	}
	chunks := make(chan []byte)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the "callback" goroutine
		defer wg.Done()
		for c := range chunks {
			if _, err := sw.Data().Write(c); err != nil {
				t.Error(err)
			}
		}
		sw.Meta().Write(s.meta())
	}()
	for b := buf.Bytes(); len(b) > 0; {
		n := min(len(b), 1000)
		chunks <- b[:n]
		b = b[n:]
	}
	close(chunks)
	wg.Wait()
	if _, err := sw.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	rep, err := busarchive.VerifyFile(context.Background(), path)
	if err != nil || rep.Streams[0].Messages != 2000 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}
