package agecrypt_test

import (
	"context"
	"crypto/sha256"
	"io"
	"testing"

	"filippo.io/age"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/store/filestore"
	"github.com/nats-keeper/nats-keeper/store/storetest"
)

// Encrypting and decrypting a 256 MiB archive keeps the heap within a few
// MiB of where it began: the Writer holds one chunk (two while a range is
// held), the reader one chunk, never the archive. Not parallel: it
// measures the heap.
func TestMemoryBounded(t *testing.T) {
	const size = 256 << 20
	const bound = 16 << 20
	st, err := filestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := newKey(t)
	s, err := agecrypt.NewSealer([]string{id.Recipient().String()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop := storetest.WatchHeap(t)
	sw, err := st.Create(ctx, "points/m/l/f1-big/bus.tar.age")
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(sw)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	w.Hold(700, 512) // as the archive holds its first data entry's header
	for off := 0; off < size; off += len(buf) {
		if off == 4<<20 {
			if _, err := w.WriteAt(buf[:512], 700); err != nil {
				t.Fatal(err)
			}
			w.Release()
		}
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
		if off == 0 { // what the patch makes of the first MiB
			first := append([]byte(nil), buf...)
			copy(first[700:], buf[:512])
			h.Write(first)
		} else {
			h.Write(buf)
		}
	}
	want := h.Sum(nil)
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	growth := stop()
	t.Logf("encrypting %d MiB, the heap grew by at most %.1f MiB", size>>20, float64(growth)/(1<<20))
	if growth > bound {
		t.Errorf("encrypting %d MiB, the heap grew by %d MiB, over %d MiB", size>>20, growth>>20, bound>>20)
	}

	stop = storetest.WatchHeap(t)
	o, err := st.Open(ctx, "points/m/l/f1-big/bus.tar.age")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	p, err := agecrypt.NewOpener([]age.Identity{id}).Open(o)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := p.Reader(ctx, 0, p.Size())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := sha256.New()
	n, err := io.CopyBuffer(got, rc, make([]byte, 1<<20))
	growth = stop()
	if err != nil || n != size {
		t.Fatalf("read %d of %d bytes: %v", n, size, err)
	}
	if string(got.Sum(nil)) != string(want) {
		t.Fatal("the decrypted archive is not what was written and patched")
	}
	t.Logf("decrypting %d MiB, the heap grew by at most %.1f MiB", size>>20, float64(growth)/(1<<20))
	if growth > bound {
		t.Errorf("decrypting %d MiB, the heap grew by %d MiB, over %d MiB", size>>20, growth>>20, bound>>20)
	}
}
