package jsbus

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestFullReaderKeepsDataGivenWithEOF(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789"), 1000)
	// DataErrReader returns the last data together with io.EOF.
	r := &fullReader{r: iotest.DataErrReader(iotest.HalfReader(bytes.NewReader(want)))}
	var got []byte
	chunk := make([]byte, 4096)
	for {
		n, err := r.Read(chunk)
		if err == io.EOF {
			if n != 0 {
				t.Fatal("data returned with io.EOF")
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n != len(chunk) && len(got)+n != len(want) {
			t.Fatalf("a short chunk of %d bytes before the end", n)
		}
		got = append(got, chunk[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
	errBoom := errors.New("boom")
	r = &fullReader{r: iotest.ErrReader(errBoom)}
	if _, err := r.Read(chunk); !errors.Is(err, errBoom) {
		t.Fatalf("error lost: %v", err)
	}
}

func TestStallWatchCancels(t *testing.T) {
	a := &Adapter{cfg: options{stall: 30 * time.Millisecond}}
	w := &watchedWriter{w: nopWriteCloser{}}
	w.touch()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	a.watch(ctx, cancel, w, make(chan struct{})) // returns once it cancels
	if !errors.Is(context.Cause(ctx), errStalled) {
		t.Fatalf("cause %v, want errStalled", context.Cause(ctx))
	}
	// Stopped before the stall, it does not cancel.
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	stop := make(chan struct{})
	close(stop)
	a.watch(ctx2, cancel2, w, stop)
	if ctx2.Err() != nil {
		t.Fatal("a stopped watch cancelled")
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

func TestNameChecks(t *testing.T) {
	for _, s := range []string{"", "a.b", "a b", "a*", "a>", "a/b", strings.Repeat("x", 256)} {
		if validName(s) {
			t.Errorf("validName(%q)", s)
		}
	}
	for _, p := range []string{"", ".", "a..b", "a.*", "a.>", "a b"} {
		if validPrefix(p) {
			t.Errorf("validPrefix(%q)", p)
		}
	}
	if !validPrefix("mesh-broker") || !validPrefix("a.b") || !validName("KEEPER_ACTS") {
		t.Fatal("good names refused")
	}
	for _, m := range []struct {
		module, name string
		want         bool
	}{{"billing", "billing", true}, {"billing", "billing_x", true}, {"billing", "billing-x", true},
		{"billing", "billingx", false}, {"bill", "billing_x", false}, {"billing", "x-billing", false}} {
		if ofModule(m.module, m.name) != m.want {
			t.Errorf("ofModule(%q, %q) != %v", m.module, m.name, m.want)
		}
	}
}

func TestParseContext(t *testing.T) {
	t.Setenv("SEEDDIR", "/seeds")
	c, err := parseContext([]byte(`{"url":"nats://h:4222","nkey":"$SEEDDIR/a.nk","creds":"file:///c/u.creds","ca":"~/ca.pem","user":"u","password":"p:w"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.NKey != "/seeds/a.nk" || c.Creds != "/c/u.creds" || strings.HasPrefix(c.CA, "~") || len(c.Unsupported) != 0 {
		t.Fatalf("parsed %+v", c)
	}
	for _, bad := range []string{`{"creds":"nsc://op/acc/user"}`, `[1]`, `{"url":1}`} {
		c, err := parseContext([]byte(bad))
		if err == nil && len(c.Unsupported) == 0 {
			t.Errorf("%s was accepted", bad)
		}
	}
	c, err = parseContext([]byte(`{"jetstream_api_prefix":"x","password":"op://vault/p"}`))
	if err != nil || len(c.Unsupported) != 2 {
		t.Fatalf("unsupported settings: %+v %v", c, err)
	}
	if _, err := parseContext(make([]byte, maxContextSize+1)); err == nil {
		t.Fatal("an oversize context was accepted")
	}
}

func FuzzParseContext(f *testing.F) {
	f.Add([]byte(`{"url":"nats://h:4222","nkey":"~/a.nk","creds":"file:///c","token":"env://X"}`))
	f.Add([]byte(`{"windows_cert_store":"user","socks_proxy":"","jetstream_domain":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseContext(data)
		if err != nil {
			return
		}
		for _, p := range []string{c.Creds, c.NKey, c.Cert, c.Key, c.CA} {
			if strings.HasPrefix(p, "file://") {
				t.Fatalf("path %q kept its scheme", p)
			}
		}
		if _, err := c.options(); err != nil && c.NKey == "" && c.UserJWT == "" {
			t.Fatalf("options failed without an nkey or JWT: %v", err)
		}
	})
}
