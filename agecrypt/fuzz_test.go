package agecrypt_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"filippo.io/age"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/store"
)

// memObject is a stored object held in memory, for the fuzzer. A read
// outside its bytes is a failure of the test (the plaintext object must
// never ask for one).
type memObject struct {
	t *testing.T
	r *bytes.Reader
}

func (m memObject) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > m.r.Size() {
		m.t.Errorf("ReadAt of %d bytes at %d of an object of %d", len(p), off, m.r.Size())
	}
	return m.r.ReadAt(p, off)
}
func (m memObject) Size() int64      { return m.r.Size() }
func (m memObject) Info() store.Info { return store.Info{Key: "o/x", Size: m.r.Size()} }
func (m memObject) Close() error     { return nil }
func (m memObject) Reader(_ context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > m.r.Size() {
		m.t.Errorf("Reader of %d bytes at %d of an object of %d", n, off, m.r.Size())
	}
	return io.NopCloser(io.NewSectionReader(m.r, off, n)), nil
}

// FuzzOpen: a stored object, whatever its bytes (a damaged or hostile
// store), opens or is refused with a sentence; what opens reads or fails
// with ErrDamaged, never panics, and never reads past its size. Its two
// ways of reading (Reader, which decrypts the chunks itself, and ReadAt,
// age's) agree on every byte and on whether the bytes authenticate, and a
// range read from the middle is those bytes.
func FuzzOpen(f *testing.F) {
	id, err := age.GenerateX25519Identity() // the seeds are made with it each run
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []int{0, 1, 100, agecrypt.ChunkSize, agecrypt.ChunkSize + 10, 2 * agecrypt.ChunkSize} {
		var ct bytes.Buffer
		w, err := age.Encrypt(&ct, id.Recipient())
		if err != nil {
			f.Fatal(err)
		}
		plain := make([]byte, n)
		for i := range plain {
			plain[i] = byte(i * 7 / 5) // not one byte repeated, so a misplaced chunk shows
		}
		w.Write(plain)
		w.Close()
		f.Add(ct.Bytes())
	}
	f.Add([]byte("age-encryption.org/v1\n-> X25519 abc\n--- def\n"))
	op := agecrypt.NewOpener([]age.Identity{id})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := op.Open(memObject{t, bytes.NewReader(data)})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a sentence")
			}
			return
		}
		if p.Size() < 0 || p.Size() > int64(len(data)) {
			t.Fatalf("a plaintext of %d bytes from %d stored", p.Size(), len(data))
		}
		rc, err := p.Reader(context.Background(), 0, p.Size())
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		_, rerr := io.Copy(&got, rc)
		if rerr != nil && !errors.Is(rerr, agecrypt.ErrDamaged) {
			t.Fatalf("reading: %v, want ErrDamaged", rerr)
		}
		if rerr == nil && int64(got.Len()) != p.Size() {
			t.Fatalf("read %d bytes of %d", got.Len(), p.Size())
		}
		b := make([]byte, p.Size())
		n, aerr := p.ReadAt(b, 0)
		if aerr != nil && !errors.Is(aerr, io.EOF) && !errors.Is(aerr, agecrypt.ErrDamaged) {
			t.Fatalf("ReadAt: %v", aerr)
		}
		whole := aerr == nil || (errors.Is(aerr, io.EOF) && int64(n) == p.Size())
		if (rerr == nil) != whole {
			t.Fatalf("Reader says %v, ReadAt %d of %d bytes and %v", rerr, n, p.Size(), aerr)
		}
		if rerr != nil {
			return
		}
		if !bytes.Equal(got.Bytes(), b) {
			t.Fatal("Reader and ReadAt read different plaintexts")
		}
		off := int64(len(data)*7) % (p.Size() + 1)
		k := (p.Size() - off) / 2
		rc, err = p.Reader(context.Background(), off, k)
		if err != nil {
			t.Fatal(err)
		}
		part, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(part, b[off:off+k]) {
			t.Fatalf("the %d bytes at %d read as %d other bytes: %v", k, off, len(part), err)
		}
	})
}
