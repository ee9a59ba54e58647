package busarchive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
)

// An archive in an object store, read through an object whose every read is
// a request (ReadAt, and Reader for a range read front to back).

// memObject is an archive in memory that counts the requests made of it.
type memObject struct {
	b []byte

	mu      sync.Mutex
	readAts int
	readers []string // the ranges Reader was asked for, "off+n"
	fail    error    // when set, Reader fails with it
}

func (o *memObject) ReadAt(p []byte, off int64) (int, error) {
	o.mu.Lock()
	o.readAts++
	o.mu.Unlock()
	return bytes.NewReader(o.b).ReadAt(p, off)
}

func (o *memObject) counts() (int, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.readAts, append([]string(nil), o.readers...)
}

func (o *memObject) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.readAts, o.readers = 0, nil
}

// rangedObject is a memObject that also reads ranges, as store.Object does.
type rangedObject struct{ *memObject }

func (o rangedObject) Reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.readers = append(o.readers, fmt.Sprintf("%d+%d", off, n))
	if o.fail != nil {
		return nil, o.fail
	}
	if off < 0 || n < 0 || off+n > int64(len(o.b)) {
		return nil, fmt.Errorf("range %d+%d outside the object's %d bytes", off, n, len(o.b))
	}
	return io.NopCloser(bytes.NewReader(o.b[off : off+n])), nil
}

func threeStreams(t *testing.T) []byte {
	t.Helper()
	return mustRead(t, writeSynthArchive(t,
		synth{name: "A", msgs: 2000, size: 1000, consumers: 2, seed: 1},
		synth{name: "B", msgs: 5, size: 10, seed: 2},
		synth{name: "C", msgs: 1000, size: 3000, consumers: 1, seed: 3}))
}

// Open of a three-stream archive asks a handful of reads, not several per
// entry (Verify then reads the data).
func TestOpenTakesAFewReads(t *testing.T) {
	b := threeStreams(t)
	o := &memObject{b: b}
	a, err := busarchive.Open(o, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := o.counts()
	t.Logf("Open of %d bytes in 3 streams made %d reads", len(b), n)
	if n > 12 {
		t.Fatalf("Open made %d reads of a 3-stream archive", n)
	}
	if len(a.Streams()) != 3 {
		t.Fatalf("streams %q", a.Streams())
	}
}

// Verify and CheckedStreamData of an archive that reads ranges read each
// entry with one ranged read, and find what they find through ReadAt.
func TestRangedArchiveReadsEntriesInOneRequest(t *testing.T) {
	b := threeStreams(t)
	want, err := openVerifyReport(t, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	o := rangedObject{&memObject{b: b}}
	a, err := busarchive.Open(o, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	o.reset()
	rep, err := a.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%+v", *rep); got != fmt.Sprintf("%+v", *want) {
		t.Fatalf("verify through ranged reads: %s\nthrough ReadAt: %+v", got, *want)
	}
	readAts, ranges := o.counts()
	var wantRanges []string
	for _, s := range a.Streams() {
		for _, e := range []string{busarchive.DataEntry(s), busarchive.MetaEntry(s)} {
			off, size := tartest.DataRange(t, b, e)
			wantRanges = append(wantRanges, fmt.Sprintf("%d+%d", off, size))
		}
	}
	if readAts != 0 || strings.Join(ranges, " ") != strings.Join(wantRanges, " ") {
		t.Fatalf("Verify made %d ReadAts and ranged reads %q, want none and %q", readAts, ranges, wantRanges)
	}

	for _, s := range a.Streams() {
		o.reset()
		r, err := a.CheckedStreamData(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		off, size := tartest.DataRange(t, b, busarchive.DataEntry(s))
		metaOff, metaSize := tartest.DataRange(t, b, busarchive.MetaEntry(s))
		readAts, ranges := o.counts()
		if !bytes.Equal(got, b[off:off+size]) || readAts != 0 ||
			strings.Join(ranges, " ") != fmt.Sprintf("%d+%d %d+%d", metaOff, metaSize, off, size) {
			t.Fatalf("CheckedStreamData(%s): %d bytes (equal %v), %d ReadAts, ranged reads %q", s, len(got), bytes.Equal(got, b[off:off+size]), readAts, ranges)
		}
		for _, read := range []func(string) (io.ReadCloser, error){a.StreamData, a.StreamMeta} {
			o.reset()
			r, err := read(s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if readAts, ranges := o.counts(); err != nil || readAts != 0 || len(ranges) != 1 || len(got) == 0 {
				t.Fatalf("%s: %d bytes, %v, %d ReadAts, ranged reads %q", s, len(got), err, readAts, ranges)
			}
		}
	}
}

// A ranged read that fails stops the verification with its error, once per
// stream, and nothing is reported complete.
func TestRangedArchiveReportsAFailedRead(t *testing.T) {
	b := threeStreams(t)
	o := rangedObject{&memObject{b: b}}
	a, err := busarchive.Open(o, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	gone := errors.New("the bucket went away")
	o.fail = gone
	rep, err := a.Verify(t.Context())
	if !errors.Is(err, gone) || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("Verify over failing ranged reads: %v", err)
	}
	for _, s := range rep.Streams {
		if s.Complete {
			t.Fatalf("stream %+v reported complete", s)
		}
	}
	if _, err := a.CheckedStreamData(t.Context(), "A"); !errors.Is(err, gone) {
		t.Fatalf("CheckedStreamData over failing ranged reads: %v", err)
	}
	if _, err := a.StreamData("A"); !errors.Is(err, gone) {
		t.Fatalf("StreamData over failing ranged reads: %v", err)
	}
}
