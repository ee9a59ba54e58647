package s3store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nats-keeper/nats-keeper/store"
)

func TestOpenRefuses(t *testing.T) {
	srv := startServer(t)
	cases := map[string]func(*testing.T, *Config){
		"bad secret": func(t *testing.T, c *Config) { credentials(t, srv.access, "wrong"+srv.secret) },
		"unknown key": func(t *testing.T, c *Config) {
			credentials(t, "nobody", srv.secret)
		},
		"no credentials": func(t *testing.T, c *Config) { credentials(t, "", "") },
		"missing bucket": func(t *testing.T, c *Config) { c.Bucket = "no-such-bucket" },
		"unreachable": func(t *testing.T, c *Config) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c.Endpoint = "http://" + l.Addr().String()
			l.Close() // nothing listens there now
		},
		"silent server": func(t *testing.T, c *Config) {
			// Takes connections and never answers: Open gives up after
			// checkTimeout.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					t.Cleanup(func() { conn.Close() })
				}
			}()
			c.Endpoint = "http://" + l.Addr().String()
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := srv.config(t)
			change(t, &cfg)
			start := time.Now()
			s, err := Open(t.Context(), cfg)
			took := time.Since(start)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("Open: %v, want ErrUnavailable", err)
			}
			if took > checkTimeout+time.Second {
				t.Fatalf("Open took %v to fail, over %v", took, checkTimeout)
			}
			if strings.Contains(err.Error(), srv.secret) {
				t.Fatalf("the error shows the secret: %v", err)
			}
			t.Logf("%v: %v", took.Round(time.Millisecond), err)
		})
	}
}

func TestDescribe(t *testing.T) {
	srv := startServer(t)
	d := srv.open(t).Describe()
	if d.Kind != "s3" || !strings.HasPrefix(d.URL, "s3://keeper-test/keeper/points?endpoint=http") || strings.Contains(d.URL, srv.secret) || strings.Contains(d.URL, srv.access) {
		t.Fatalf("Describe() = %+v", d)
	}
	if d.Publish == "" || d.Ranges == "" || d.Listing == "" {
		t.Fatalf("Describe() leaves a guarantee unsaid: %+v", d)
	}
}

// TestDamagedPart sends a part with a SHA-256 that is not its own: the
// server must refuse it, so a part damaged on the way is never stored.
func TestDamagedPart(t *testing.T) {
	s := startServer(t).open(t)
	k := &sink{s: s, key: "damaged", full: s.full("damaged")}
	defer k.Abort(t.Context())
	data := random(t, store.PartSize)
	wrong := sha256.Sum256(append(data[:len(data):len(data)], 0))
	err := k.Part(t.Context(), 1, store.Blocks{data}, wrong)
	if err == nil {
		t.Fatal("the server took a part whose checksum is not its own")
	}
	t.Log(err)
	// The sink signs with the same SHA-256, so the signature check alone
	// refuses that. Does the server check x-amz-checksum-sha256 itself? Send
	// a correctly signed part with a wrong checksum header.
	id, err := k.upload(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.c.UploadPart(t.Context(), &s3.UploadPartInput{
		Bucket: aws.String(s.bucket), Key: aws.String(k.full), UploadId: aws.String(id),
		PartNumber: aws.Int32(1), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ChecksumSHA256: aws.String(b64(wrong[:])),
	})
	if err == nil {
		t.Fatal("the server took a part whose x-amz-checksum-sha256 is not its own")
	}
	t.Log(err)
	// The same through a single PutObject: Complete of a short object.
	k2 := &sink{s: s, key: "damaged-small", full: s.full("damaged-small")}
	small := data[:100]
	if err := k2.Part(t.Context(), 1, store.Blocks{small}, sha256.Sum256(small)); err != nil {
		t.Fatal(err)
	}
	k2.small[0] ^= 1 // damaged after it was hashed
	if _, err := k2.Complete(t.Context(), 1, 100, store.CombineSums([][32]byte{sha256.Sum256(small)})); err == nil {
		t.Fatal("the server took a PutObject whose checksum is not its own")
	} else {
		t.Log(err)
	}
}

func TestParseURL(t *testing.T) {
	good := map[string][2]string{
		"s3://bucket/prefix":        {"bucket", "prefix"},
		"s3://my.bucket-1/a/b/c/":   {"my.bucket-1", "a/b/c"},
		"s3://bucket":               {"bucket", ""},
		"s3://bucket/":              {"bucket", ""},
		"s3://b12/nats-keeper/prod": {"b12", "nats-keeper/prod"},
	}
	for u, want := range good {
		b, p, err := ParseURL(u)
		if err != nil || b != want[0] || p != want[1] {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", u, b, p, err, want[0], want[1])
		}
	}
	for _, u := range []string{
		"", "bucket/prefix", "http://bucket/prefix", "s3:/bucket", "S3://bucket/x", "s3://Bucket/x",
		"s3://ab/x", "s3://" + strings.Repeat("a", 64), "s3://-bucket/x", "s3://bucket-/x", "s3://a..b/x",
		"s3://192.168.1.1/x", "s3://xn--bucket/x", "s3://bucket-s3alias/x", "s3://buck_et/x",
		"s3://bucket/a//b", "s3://bucket/../x", "s3://bucket/a b", "s3://bucket/x?region=eu", "s3://bucket//x",
	} {
		if _, _, err := ParseURL(u); err == nil {
			t.Errorf("ParseURL(%q) succeeded", u)
		} else if !strings.Contains(err.Error(), " ") {
			t.Errorf("ParseURL(%q): %v is not a sentence", u, err)
		}
	}
}

// A server that goes away after Open: every call fails with ErrUnavailable.
func TestUnavailableAfterOpen(t *testing.T) {
	s := startServer(t).open(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	s.c = s3.New(s.c.Options(), func(o *s3.Options) { o.BaseEndpoint = aws.String(gone) })
	_, statErr := s.Stat(t.Context(), "a")
	_, listErr := s.List(t.Context(), "")
	w, _ := s.Create(t.Context(), "a")
	w.Write([]byte("x"))
	_, commitErr := w.Commit(t.Context())
	for what, err := range map[string]error{"Stat": statErr, "List": listErr, "Commit": commitErr, "Delete": s.Delete(t.Context(), "a"), "Sweep": s.Sweep(t.Context(), 0)} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the server gone: %v, want ErrUnavailable", what, err)
		}
	}
}
