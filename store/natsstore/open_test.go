package natsstore

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct{ in, servers, bucket string }{
		{"nats://vault:4222/keeper-points", "nats://vault:4222", "keeper-points"},
		{"tls://vault.example.com:4443/points_1", "tls://vault.example.com:4443", "points_1"},
		{"nats://a:4222,b:4223,c/kp", "nats://a:4222,nats://b:4223,nats://c", "kp"},
		{"nats://[::1]:4222/kp", "nats://[::1]:4222", "kp"},
	} {
		servers, bucket, err := ParseURL(c.in)
		if err != nil || servers != c.servers || bucket != c.bucket {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", c.in, servers, bucket, err, c.servers, c.bucket)
		}
	}
	for _, in := range []string{"", "vault:4222/kp", "http://vault/kp", "s3://b/p", "nats://vault:4222", "nats://vault:4222/",
		"nats://vault:4222/a/b", "nats://vault:4222/a.b", "nats://u:p@vault:4222/kp", "nats://tok@vault/kp",
		"nats://vault/kp?x=1", "nats://vault:0/kp", "nats://vault:x/kp", "nats://a,,b/kp", "nats:///kp"} {
		if s, b, err := ParseURL(in); err == nil || !strings.Contains(err.Error(), "nats://host:port/<bucket>") {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want a refusal that says what to write", in, s, b, err)
		}
	}
}

// TestOpen: a bad bucket name, a stream that is not an object store and a
// closed connection are refused; a bucket made elsewhere (direct gets on)
// is adopted with direct gets off, and its plain objects read.
func TestOpen(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	js := single(t)
	for _, name := range []string{"", "a.b", "a b", "a/b", "a*", strings.Repeat("x", 252)} {
		if _, err := Open(ctx, js, name, Options{}); err == nil || !strings.Contains(err.Error(), "not an object-store bucket name") {
			t.Errorf("Open(%q): %v", name, err)
		}
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OBJ_other", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, js, "other", Options{}); err == nil || !strings.Contains(err.Error(), "does not take the subjects") {
		t.Errorf("Open of a stream that is no object store: %v", err)
	}
	s := open(t, js, "fresh", Options{})
	if s.replicas != 1 || s.stream.CachedInfo().Config.AllowDirect || s.stream.CachedInfo().Config.Storage != jetstream.FileStorage {
		t.Errorf("a bucket made on one server: %+v", s.stream.CachedInfo().Config)
	}

	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "made"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, "plain/x", "put by someone else"); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, "not a key", "a name no key can be"); err != nil {
		t.Fatal(err)
	}
	s = open(t, js, "made", Options{})
	if s.stream.CachedInfo().Config.AllowDirect {
		t.Error("direct gets are still on")
	}
	l, err := s.List(ctx, "")
	if err != nil || len(l) != 1 || l[0].Key != "plain/x" || l[0].Size != 19 || l[0].Sum != "" {
		t.Fatalf("List of a bucket with a plain object: %+v, %v", l, err)
	}
	o, err := s.Open(ctx, "plain/x")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := o.Reader(ctx, 4, 2)
	got, err := io.ReadAll(r)
	p := make([]byte, 4)
	if _, err2 := o.ReadAt(p, 15); err != nil || err2 != nil || string(got) != "by" || string(p) != "else" {
		t.Fatalf("reading a plain object: %q, %v; %q, %v", got, err, p, err2)
	}

	js.Conn().Close()
	_, err = Open(ctx, js, "fresh", Options{})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a closed connection: %v", err)
	}
	if _, err := s.Stat(ctx, "plain/x"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Stat on a closed connection: %v", err)
	}
}
