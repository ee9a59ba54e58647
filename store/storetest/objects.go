package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/nats-keeper/nats-keeper/store"
)

const ps = store.PartSize

// Objects of every size around the part size come back as written, whole and
// in ranges (at the part edges, the last byte), through ReadAt and Reader;
// their sum is NewChecksum's, and Stat and Open say their size.
func testRoundTrip(t *testing.T, s store.Store) {
	for _, c := range []struct {
		name string
		size int
	}{{"empty", 0}, {"small", 1000}, {"PartSize", ps}, {"PartSize+1", ps + 1}, {"3.5xPartSize", 3*ps + ps/2}} {
		t.Run(c.name, func(t *testing.T) {
			key := "round/trip/" + c.name
			data := randomBytes(uint64(c.size), c.size)
			info := mustPut(t, s, key, data)
			if info.Sum != checksum(data) {
				t.Errorf("Commit's sum is %q; NewChecksum over the bytes says %s", info.Sum, checksum(data))
			}
			wantInfo(t, "Commit", info, key, data)
			st, err := s.Stat(t.Context(), key)
			if err != nil {
				t.Fatalf("Stat after Commit: %v", err)
			}
			wantInfo(t, "Stat", st, key, data)
			o, err := s.Open(t.Context(), key)
			if err != nil {
				t.Fatalf("Open after Commit: %v", err)
			}
			defer o.Close()
			if o.Size() != int64(c.size) {
				t.Errorf("Open's Size is %d, want %d", o.Size(), c.size)
			}
			wantInfo(t, "Open's Info", o.Info(), key, data)
			wantObject(t, s, key, data)
			for _, r := range ranges(int64(c.size)) {
				checkRange(t, o, data, r[0], r[1])
			}
			checkPastTheEnd(t, o, int64(c.size))
		})
	}
}

// ranges are the [off, n] worth reading in an object of size bytes: its
// start, each part edge, the last byte, a range over two parts.
func ranges(size int64) [][2]int64 {
	rs := [][2]int64{{0, min(size, 1000)}, {size, 0}}
	for edge := int64(ps); edge < size; edge += ps {
		rs = append(rs, [2]int64{edge - 1, 2}, [2]int64{edge, 1}, [2]int64{edge - 1, 1}, [2]int64{edge - 100, min(200+ps, size-edge+100)})
	}
	if size > 0 {
		rs = append(rs, [2]int64{size - 1, 1}, [2]int64{size / 3, size / 2})
	}
	return rs
}

func checkRange(t *testing.T, o store.Object, data []byte, off, n int64) {
	t.Helper()
	want := data[off : off+n]
	got := make([]byte, n)
	k, err := o.ReadAt(got, off)
	if k != int(n) || (err != nil && !(err == io.EOF && off+n == int64(len(data)))) {
		t.Errorf("ReadAt(%d bytes at %d) of %d: read %d, %v", n, off, len(data), k, err)
	} else if !bytes.Equal(got, want) {
		t.Errorf("ReadAt(%d bytes at %d) differs from the bytes written from byte %d", n, off, off+int64(firstDiff(got, want)))
	}
	r, err := o.Reader(t.Context(), off, n)
	if err != nil {
		t.Errorf("Reader(%d, %d) of %d: %v", off, n, len(data), err)
		return
	}
	defer r.Close()
	got, err = io.ReadAll(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("Reader(%d, %d) of %d read %d bytes (equal: %v), %v", off, n, len(data), len(got), bytes.Equal(got, want), err)
	}
}

// checkPastTheEnd: ReadAt past the end says io.EOF, as io.ReaderAt does, and
// a Reader past the end is refused.
func checkPastTheEnd(t *testing.T, o store.Object, size int64) {
	t.Helper()
	buf := make([]byte, 10)
	if n, err := o.ReadAt(buf, size); n != 0 || err != io.EOF {
		t.Errorf("ReadAt(10 bytes at %d), the end: %d, %v; want 0, io.EOF", size, n, err)
	}
	if size >= 5 {
		if n, err := o.ReadAt(buf, size-5); n != 5 || err != io.EOF {
			t.Errorf("ReadAt(10 bytes at %d), 5 before the end: %d, %v; want 5, io.EOF", size-5, n, err)
		}
	}
	if r, err := o.Reader(t.Context(), size-min(size, 5), 10); err == nil {
		got, err := io.ReadAll(r)
		r.Close()
		if err == nil {
			t.Errorf("Reader(%d, 10) past the end of %d bytes was taken and read %d bytes with no error", size-min(size, 5), size, len(got))
		}
	}
}

// The shape an archive writer makes: a tar header written with size 0,
// held, two parts of data after it, then its size patched in and released.
// The committed bytes and sum have the patch, wherever the header falls in
// its part.
func testHoldPatchesTarHeader(t *testing.T, s store.Store) {
	for _, c := range []struct {
		name string
		at   int64
	}{{"near the start", 1536}, {"in the last block of a part", ps - 512}, {"at the start of a part", ps}} {
		t.Run(c.name, func(t *testing.T) {
			key := "points/m/l/f1-hold/bus.tar"
			w, err := s.Create(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			model := randomBytes(1, int(c.at))
			hdr := bytes.Repeat([]byte{0}, 512)
			copy(hdr, "streams/ORDERS/stream.arc.s2")
			copy(hdr[124:], "00000000000\x00") // the size, not known yet
			data := randomBytes(2, 2*ps+12345)
			if err := writeAll(w, model); err != nil {
				t.Fatal(err)
			}
			w.Hold(c.at, 512)
			model = append(append(model, hdr...), data...)
			if err := writeAll(w, append(hdr, data...)); err != nil {
				t.Fatal(err)
			}
			copy(hdr[124:], fmt.Sprintf("%011o\x00", len(data)))
			if _, err := w.WriteAt(hdr, c.at); err != nil {
				t.Fatalf("WriteAt of the held header at %d: %v", c.at, err)
			}
			copy(model[c.at:], hdr)
			w.Release()
			tail := make([]byte, 512-len(data)%512+1024)
			if err := writeAll(w, tail); err != nil {
				t.Fatal(err)
			}
			model = append(model, tail...)
			info, err := w.Commit(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if info.Sum != checksum(model) {
				t.Errorf("Commit's sum %s is not NewChecksum's over the patched bytes, %s", info.Sum, checksum(model))
			}
			wantObject(t, s, key, model)
		})
	}
}

// A WriteAt outside the held range fails, and the object can no longer be
// committed: nothing appears.
func testWriteAtOutsideHold(t *testing.T, s store.Store) {
	w, err := s.Create(t.Context(), "x/patched")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	writeAll(w, randomBytes(3, 4096))
	w.Hold(1024, 512)
	writeAll(w, randomBytes(4, 4096))
	if _, err := w.WriteAt([]byte("x"), 1023); err == nil {
		t.Error("a WriteAt one byte before the held range was taken")
	}
	if _, err := w.Commit(t.Context()); err == nil {
		t.Error("Commit after a refused WriteAt succeeded")
	}
	wantNotFound(t, s, "x/patched", "after a refused WriteAt")
}

// Nothing of an object is visible before Commit returns: not to Stat, Open
// or List.
func testInvisibleUntilCommit(t *testing.T, s store.Store) {
	key := "points/m/l/f1-new/bus.tar"
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	data := randomBytes(5, ps+ps/2)
	if err := writeAll(w, data); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s, key, "before Commit")
	for _, prefix := range []string{"", "points/", key} {
		if infos, err := s.List(t.Context(), prefix); err != nil || len(infos) != 0 {
			t.Errorf("List(%q) before Commit: %v, %v; want nothing", prefix, keysOf(infos), err)
		}
	}
	if _, err := w.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantObject(t, s, key, data)
}

// Abort leaves nothing under the key, and is safe twice.
func testAbortLeavesNothing(t *testing.T, s store.Store) {
	key := "aside/m.l.1/bus.tar"
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(w, randomBytes(6, ps+ps/2))
	w.Abort()
	w.Abort()
	wantNotFound(t, s, key, "after Abort")
	if infos, err := s.List(t.Context(), ""); err != nil || len(infos) != 0 {
		t.Errorf("List after Abort: %v, %v; want nothing", keysOf(infos), err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("a Write after Abort was taken")
	}
	if _, err := w.Commit(t.Context()); err == nil {
		t.Error("a Commit after Abort succeeded")
	}
	wantNotFound(t, s, key, "after a Commit after Abort")
}

// An aborted write over an existing key leaves the object that was there.
func testAbortKeepsOld(t *testing.T, s store.Store) {
	old := randomBytes(7, 5000)
	mustPut(t, s, "store.json", old)
	w, err := s.Create(t.Context(), "store.json")
	if err != nil {
		t.Fatal(err)
	}
	writeAll(w, randomBytes(8, ps+1))
	w.Abort()
	wantObject(t, s, "store.json", old)
}

// A write whose context fails commits nothing.
func testFailedContext(t *testing.T, s store.Store) {
	key := "points/m/l/f1-cancelled/bus.tar"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := s.Create(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	writeAll(w, randomBytes(9, ps+ps/2))
	cancel()
	writeAll(w, randomBytes(10, ps)) // may fail: the context is done
	if _, err := w.Commit(ctx); err == nil {
		t.Error("Commit with a cancelled context succeeded")
	}
	wantNotFound(t, s, key, "after a Commit with a cancelled context")
}

// After Commit the writer takes nothing more, a second Commit fails, and
// Abort leaves the object alone.
func testWriterAfterCommit(t *testing.T, s store.Store) {
	w, err := s.Create(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(11, 100)
	writeAll(w, data)
	if _, err := w.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("a Write after Commit was taken")
	}
	if _, err := w.Commit(t.Context()); err == nil {
		t.Error("a second Commit succeeded")
	}
	w.Abort()
	wantObject(t, s, "k", data)
}

// Committing over a key replaces the object whole.
func testReplace(t *testing.T, s store.Store) {
	key := "points/m/l/f1-x/bus.tar"
	mustPut(t, s, key, randomBytes(12, 2*ps+5))
	b := randomBytes(13, 3000)
	info := mustPut(t, s, key, b)
	wantInfo(t, "Commit over an object", info, key, b)
	wantObject(t, s, key, b)
	st, err := s.Stat(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	wantInfo(t, "Stat after the replacement", st, key, b)
	infos, err := s.List(t.Context(), "")
	if err != nil || len(infos) != 1 {
		t.Fatalf("List after the replacement: %v, %v; want the one object", keysOf(infos), err)
	}
	wantInfo(t, "List after the replacement", infos[0], key, b)
}

// An object opened before its key was committed over reads as the old
// object or the new one, or fails; never a mix.
func testReplaceWhileOpen(t *testing.T, s store.Store) {
	key := "aside/m.l.2/bus.tar"
	a, b := randomBytes(14, ps+1000), randomBytes(15, ps+1000)
	mustPut(t, s, key, a)
	o, err := s.Open(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	mustPut(t, s, key, b)
	got := make([]byte, len(a))
	if n, err := o.ReadAt(got, 0); err == nil || errors.Is(err, io.EOF) && n == len(got) {
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Error("an object opened before a replacement reads as a mix of the old and the new")
		}
	}
	wantObject(t, s, key, b)
}
