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
	for _, s := range []string{"", "a.b", "a b", "a*", "a>", "a/b", `a\b`, "a\x01b", "a\xffb", strings.Repeat("x", 256)} {
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
}

// readChunk keeps the bytes a reader returns together with io.EOF, without
// fullReader in front of it: every byte of the archive is sent.
func TestReadChunkKeepsDataGivenWithEOF(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789"), 1000)
	r := iotest.DataErrReader(iotest.HalfReader(bytes.NewReader(want)))
	chunk := make([]byte, 4096)
	var got []byte
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("readChunk did not reach the end")
		}
		n, err := readChunk(t.Context(), r, chunk, int64(len(got)))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, chunk[:n]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
}
