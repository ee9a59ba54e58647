package agecrypt_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"filippo.io/age"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/s3test"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/filestore"
	"github.com/nats-keeper/nats-keeper/store/natsstore"
	"github.com/nats-keeper/nats-keeper/store/s3store"
)

// TestEveryBackend writes an encrypted object of a few parts on each store
// backend, with a held range across a part boundary (the ciphertext's hold
// then spans two of the backend's parts), and reads it back with age's own
// decrypter and with the Opener, whole and in ranges.
func TestEveryBackend(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"file", func(t *testing.T) store.Store {
			s, err := filestore.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"nats", func(t *testing.T) store.Store {
			srv := natstest.Start(t, natstest.Options(t.TempDir()))
			js, err := jetstream.New(natstest.Connect(t, srv))
			if err != nil {
				t.Fatal(err)
			}
			s, err := natsstore.Open(context.Background(), js, "sealed", natsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"s3", func(t *testing.T) store.Store {
			endpoint, access, secret := s3test.Start(t)
			s3test.MakeBucket(t, endpoint, access, secret, "sealed")
			for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": "",
				"AWS_PROFILE": "", "AWS_REGION": "", "AWS_CONFIG_FILE": "/nonexistent/aws-config",
				"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials", "AWS_EC2_METADATA_DISABLED": "true"} {
				t.Setenv(k, v)
			}
			s, err := s3store.Open(context.Background(), s3store.Config{Bucket: "sealed", Endpoint: endpoint, PathStyle: true})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			defer st.Close()
			id := newKey(t)
			s, err := agecrypt.NewSealer([]string{id.Recipient().String()})
			if err != nil {
				t.Fatal(err)
			}
			plain := make([]byte, 2*store.PartSize+12345)
			for i := range plain {
				plain[i] = byte(rand.IntN(256))
			}
			writeSealed(t, st, s, "points/m/l/f1-x/bus.tar.age", plain, store.PartSize-200)
			ct := readAll(t, st, "points/m/l/f1-x/bus.tar.age")
			if bytes.Contains(ct, plain[1000:1064]) {
				t.Fatal("the stored object holds plaintext")
			}
			r, err := age.Decrypt(bytes.NewReader(ct), id)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("age.Decrypt: %d bytes, %v", len(got), err)
			}
			o, err := st.Open(context.Background(), "points/m/l/f1-x/bus.tar.age")
			if err != nil {
				t.Fatal(err)
			}
			p, err := agecrypt.NewOpener([]age.Identity{id}).Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			rc, err := p.Reader(context.Background(), 0, p.Size())
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("Reader: %d bytes, %v", len(got), err)
			}
			for range 10 {
				off := rand.IntN(len(plain))
				n := min(len(plain)-off, 1+rand.IntN(300000))
				b := make([]byte, n)
				if m, err := p.ReadAt(b, int64(off)); m != n || (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(b, plain[off:off+n]) {
					t.Fatalf("ReadAt(%d, %d): %d, %v", n, off, m, err)
				}
			}
		})
	}
}
