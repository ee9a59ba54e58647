package agecrypt_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/filestore"
)

func newKey(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// writeSealed writes plain through a sealing Writer, holding the 512 bytes
// at hold (when >= 0) from before they are written until after the next
// part, and patching them with patch, as the archive writer patches a tar
// header. It returns the stored object's key.
func writeSealed(t *testing.T, st store.Store, s *agecrypt.Sealer, key string, plain []byte, hold int) {
	t.Helper()
	ctx := context.Background()
	sw, err := st.Create(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(sw)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	write := func(p []byte) {
		for len(p) > 0 { // in uneven pieces, as a snapshot arrives
			k := min(len(p), 1+rand.IntN(40000))
			if _, err := w.Write(p[:k]); err != nil {
				t.Fatal(err)
			}
			p = p[k:]
		}
	}
	if hold < 0 {
		write(plain)
	} else {
		write(plain[:hold])
		w.Hold(int64(hold), 512)
		write(make([]byte, 512)) // the placeholder
		end := min(len(plain), hold+512+3*agecrypt.ChunkSize+99)
		write(plain[hold+512 : end])
		if _, err := w.WriteAt(plain[hold:hold+512], int64(hold)); err != nil {
			t.Fatal(err)
		}
		w.Release()
		write(plain[end:])
	}
	if got := w.PlainSize(); got != int64(len(plain)) {
		t.Fatalf("PlainSize %d, wrote %d", got, len(plain))
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, st store.Store, key string) []byte {
	t.Helper()
	o, err := st.Open(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b := make([]byte, o.Size())
	if _, err := o.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

func TestSealedIsAgeAndOpensAsPlaintext(t *testing.T) {
	st, err := filestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id := newKey(t)
	other := newKey(t)
	s, err := agecrypt.NewSealer([]string{id.Recipient().String(), other.Recipient().String()})
	if err != nil {
		t.Fatal(err)
	}
	const c = agecrypt.ChunkSize
	cases := []struct {
		size, hold int
	}{
		{0, -1}, {1, -1}, {c - 1, -1}, {c, -1}, {c + 1, -1}, {3*c + 7, -1}, {2 * c, -1},
		{600, 0}, {c, c - 512}, {c + 600, c - 300}, {5*c + 3, 2*c - 1}, {9 * c, 4 * c}, {520, 8},
	}
	for i, tc := range cases {
		plain := make([]byte, tc.size)
		for j := range plain {
			plain[j] = byte(rand.IntN(256))
		}
		key := "o/" + string(rune('a'+i))
		writeSealed(t, st, s, key, plain, tc.hold)

		// The reference decrypter (age's own stream reader) reads it whole,
		// with either recipient's identity.
		for _, who := range []age.Identity{id, other} {
			r, err := age.Decrypt(bytes.NewReader(readAll(t, st, key)), who)
			if err != nil {
				t.Fatalf("size %d hold %d: age.Decrypt: %v", tc.size, tc.hold, err)
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("size %d hold %d: age.Decrypt read %d bytes (%v), not the plaintext of %d", tc.size, tc.hold, len(got), err, len(plain))
			}
		}

		o, err := st.Open(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		p, err := agecrypt.NewOpener([]age.Identity{id}).Open(o)
		if err != nil {
			t.Fatalf("size %d: Open: %v", tc.size, err)
		}
		if p.Size() != int64(tc.size) {
			t.Fatalf("size %d: the plaintext object says %d", tc.size, p.Size())
		}
		for k := 0; k < 20 && tc.size > 0; k++ {
			off := rand.IntN(tc.size)
			n := rand.IntN(tc.size-off) + 1
			b := make([]byte, n)
			if m, err := p.ReadAt(b, int64(off)); m != n || (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(b, plain[off:off+n]) {
				t.Fatalf("size %d: ReadAt(%d, %d) = %d, %v, or other bytes", tc.size, n, off, m, err)
			}
			rc, err := p.Reader(context.Background(), int64(off), int64(n))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, plain[off:off+n]) {
				t.Fatalf("size %d: Reader(%d, %d) read %d bytes (%v), or other bytes", tc.size, off, n, len(got), err)
			}
		}
		p.Close()
	}
}

func sealOne(t *testing.T, plain []byte) (store.Store, *age.X25519Identity) {
	t.Helper()
	st, err := filestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id := newKey(t)
	s, err := agecrypt.NewSealer([]string{id.Recipient().String()})
	if err != nil {
		t.Fatal(err)
	}
	writeSealed(t, st, s, "o/x", plain, 100)
	return st, id
}

func TestOpenRefusesWithoutOrWithAnotherIdentity(t *testing.T) {
	st, _ := sealOne(t, bytes.Repeat([]byte("secret payload "), 10000))
	o, err := st.Open(context.Background(), "o/x")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := agecrypt.NewOpener(nil).Open(o); !errors.Is(err, agecrypt.ErrNoIdentity) {
		t.Fatalf("no identity: %v, want ErrNoIdentity", err)
	}
	if _, err := agecrypt.NewOpener([]age.Identity{newKey(t)}).Open(o); !errors.Is(err, agecrypt.ErrWrongIdentity) {
		t.Fatalf("another identity: %v, want ErrWrongIdentity", err)
	}
}

// A flipped byte anywhere in a payload chunk fails that chunk's reads with
// ErrDamaged; in the header or the last chunk it fails Open.
func TestFlippedByteIsDamage(t *testing.T) {
	plain := bytes.Repeat([]byte("0123456789abcdef"), 3*agecrypt.ChunkSize/16+5)
	st, id := sealOne(t, plain)
	ct := readAll(t, st, "o/x")
	for _, at := range []int{10, len(ct) / 2, len(ct) - 3} {
		bad := bytes.Clone(ct)
		bad[at] ^= 0x40
		w, err := st.Create(context.Background(), "o/bad")
		if err != nil {
			t.Fatal(err)
		}
		w.Write(bad)
		if _, err := w.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		o, err := st.Open(context.Background(), "o/bad")
		if err != nil {
			t.Fatal(err)
		}
		p, err := agecrypt.NewOpener([]age.Identity{id}).Open(o)
		if err == nil {
			rc, rerr := p.Reader(context.Background(), 0, p.Size())
			if rerr != nil {
				t.Fatal(rerr)
			}
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
			b := make([]byte, p.Size())
			if _, err2 := p.ReadAt(b, 0); !errors.Is(err2, agecrypt.ErrDamaged) {
				t.Fatalf("byte %d flipped: ReadAt: %v, want ErrDamaged", at, err2)
			}
		}
		// The header's MAC fails as a wrong identity would not: it says damaged.
		if !errors.Is(err, agecrypt.ErrDamaged) && !(at == 10 && errors.Is(err, agecrypt.ErrWrongIdentity)) {
			t.Fatalf("byte %d flipped: %v, want ErrDamaged", at, err)
		}
		o.Close()
	}
}

func TestParseRecipients(t *testing.T) {
	a, b := newKey(t).Recipient().String(), newKey(t).Recipient().String()
	got, err := agecrypt.ParseRecipients(strings.NewReader("# ops team\n\n  " + a + "  \n" + b + "\n" + a + "\n   # old key removed\n"))
	if err != nil || len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "# only a comment\n", a + "\nage1notakey\n", "AGE-SECRET-KEY-1XYZ\n", strings.Repeat("#", agecrypt.MaxKeyFile+1)} {
		if _, err := agecrypt.ParseRecipients(strings.NewReader(bad)); err == nil {
			t.Fatalf("%.40q was accepted", bad)
		} else if strings.Contains(err.Error(), "AGE-SECRET-KEY-1XYZ") {
			t.Fatalf("the error quotes a secret: %v", err)
		}
	}
}

// FuzzParseRecipients: a recipients file is outside input (a flag names
// it). What is accepted is 1 to MaxRecipients distinct recipients, each
// one that parses back to itself, that make a sealer; a refusal never
// quotes more than the first 12 characters of a line, so a secret key
// pasted by mistake is not repeated in a log.
func FuzzParseRecipients(f *testing.F) {
	f.Add("# c\nage1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n")
	f.Add("age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\r\n\n#\n")
	f.Add("\x00\xff age1")
	f.Add("AGE-SECRET-KEY-1QYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQSZQGPQYQS\n")
	f.Add("age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n age1AGE-SECRET-KEY-1QYQSZQGPQYQSZQGPQ\n")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := agecrypt.ParseRecipients(strings.NewReader(in))
		if err != nil {
			for line := range strings.Lines(in) {
				line = strings.TrimSpace(line)
				if i := strings.Index(line, "AGE-SECRET-KEY-"); i >= 0 && len(line) >= i+20 && strings.Contains(err.Error(), line[i:i+20]) {
					t.Fatalf("the error quotes a secret key: %v", err)
				}
			}
			return
		}
		if len(got) == 0 || len(got) > agecrypt.MaxRecipients {
			t.Fatalf("%d recipients accepted", len(got))
		}
		seen := map[string]bool{}
		for _, s := range got {
			r, err := agecrypt.ParseRecipient(s)
			if err != nil || r.String() != s || seen[s] {
				t.Fatalf("accepted recipient %q parses as %v, %v (seen before: %v)", s, r, err, seen[s])
			}
			seen[s] = true
		}
		if _, err := agecrypt.NewSealer(got); err != nil {
			t.Fatalf("parsed recipients %v do not make a sealer: %v", got, err)
		}
	})
}
