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

// memObject is a stored object held in memory, for the fuzzer.
type memObject struct{ r *bytes.Reader }

func (m memObject) ReadAt(p []byte, off int64) (int, error) { return m.r.ReadAt(p, off) }
func (m memObject) Size() int64                             { return m.r.Size() }
func (m memObject) Info() store.Info                        { return store.Info{Key: "o/x", Size: m.r.Size()} }
func (m memObject) Close() error                            { return nil }
func (m memObject) Reader(_ context.Context, off, n int64) (io.ReadCloser, error) {
	return io.NopCloser(io.NewSectionReader(m.r, off, n)), nil
}

// FuzzOpen: a stored object, whatever its bytes (a damaged or hostile
// store), opens or is refused with a sentence; what opens reads or fails
// with ErrDamaged, never panics, and never reads past its size.
func FuzzOpen(f *testing.F) {
	id, err := age.GenerateX25519Identity() // the seeds are made with it each run
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []int{0, 1, 100, agecrypt.ChunkSize + 10} {
		var ct bytes.Buffer
		w, err := age.Encrypt(&ct, id.Recipient())
		if err != nil {
			f.Fatal(err)
		}
		w.Write(bytes.Repeat([]byte{'x'}, n))
		w.Close()
		f.Add(ct.Bytes())
	}
	f.Add([]byte("age-encryption.org/v1\n-> X25519 abc\n--- def\n"))
	op := agecrypt.NewOpener([]age.Identity{id})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := op.Open(memObject{bytes.NewReader(data)})
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
		n, err := io.Copy(io.Discard, rc)
		if err != nil && !errors.Is(err, agecrypt.ErrDamaged) {
			t.Fatalf("reading: %v, want ErrDamaged", err)
		}
		if err == nil && n != p.Size() {
			t.Fatalf("read %d bytes of %d", n, p.Size())
		}
		b := make([]byte, p.Size())
		if _, err := p.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, agecrypt.ErrDamaged) {
			t.Fatalf("ReadAt: %v", err)
		}
	})
}
