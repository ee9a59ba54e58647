package busarchive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server/archive"
)

// readAll lists what a reader of the archive b finds: each entry's header
// and, when read is set, its bytes, then the error that ended it.
func readAll(b []byte, read bool, next func() (string, error), rd func([]byte) (int, error)) []string {
	var out []string
	for range 1 << 16 {
		h, err := next()
		if err != nil {
			return append(out, "error: "+err.Error())
		}
		out = append(out, h)
		if !read {
			continue
		}
		var got bytes.Buffer
		p := make([]byte, 7)
		for {
			n, err := rd(p)
			got.Write(p[:n])
			if err != nil {
				out = append(out, fmt.Sprintf("read %q: %v", got.String(), err))
				break
			}
		}
	}
	return out
}

// theirs and ours are what nats-server's reader and the decoder's find.
func theirs(b []byte, read bool) []string {
	u := archive.NewReader(bytes.NewReader(b))
	return readAll(b, read, func() (string, error) {
		h, err := u.Next()
		if err != nil {
			return "", err
		}
		return asArcHeader(arcHeader{Name: []byte(h.Name), Timestamp: h.Timestamp, Sequence: h.Sequence, HeaderSize: h.HeaderSize, PayloadSize: h.PayloadSize}), nil
	}, u.Read)
}

func ours(b []byte, read bool) []string {
	u := newArcReader(bytes.NewReader(b))
	return readAll(b, read, func() (string, error) {
		h, err := u.next()
		if err != nil {
			return "", err
		}
		return asArcHeader(*h), nil
	}, u.Read)
}

func asArcHeader(h arcHeader) string {
	return fmt.Sprintf("%q %d %d %d %d", h.Name, h.Timestamp, h.Sequence, h.HeaderSize, h.PayloadSize)
}

// arcCases are archives whole and damaged: cut at every length, a wrong
// magic, sizes that overflow, a name over the bound.
func arcCases(t testing.TB) [][]byte {
	whole := arcBytes(t, stateEntry(1, 3, 3, 1), consumerEntry("c"), msgEntry(1), msgEntry(2), msgEntry(3), endEntry)
	cases := [][]byte{whole, nil, []byte("NATSARC"), []byte("NATSARC2"), []byte(archive.MagicBytes)}
	for n := range len(whole) {
		cases = append(cases, whole[:n])
	}
	// name length, timestamp, sequence, header size, payload size (varints).
	cases = append(cases,
		append([]byte(archive.MagicBytes), 0x01, 0x02, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01, 'x'),
		append([]byte(archive.MagicBytes), 0x80, 0x80, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00),
		append([]byte(archive.MagicBytes), 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x01),
		append([]byte(archive.MagicBytes), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))
	return cases
}

// TestArcReaderAgreesWithTheServers: the archive reader of the decoder finds
// in every archive, whole or damaged, what nats-server's archive.Reader
// finds: the same entries, bytes and errors.
func TestArcReaderAgreesWithTheServers(t *testing.T) {
	for i, b := range arcCases(t) {
		for _, read := range []bool{false, true} {
			got, want := ours(b, read), theirs(b, read)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("case %d (read %v, %d bytes):\n got: %q\nwant: %q", i, read, len(b), got, want)
			}
		}
	}
	if _, err := newArcReader(bytes.NewReader(arcCases(t)[2])).next(); !errors.Is(err, io.EOF) {
		t.Fatalf("an archive shorter than its magic: %v, want io.EOF as the server's reader", err)
	}
}

// FuzzArcReader holds the decoder's archive reader to nats-server's on
// arbitrary bytes (b[0] odd: the entries' bytes are read too).
//
//	go test ./busarchive -run '^$' -fuzz FuzzArcReader -fuzztime 60s
func FuzzArcReader(f *testing.F) {
	for _, b := range arcCases(f) {
		f.Add(append([]byte{0}, b...))
		f.Add(append([]byte{1}, b...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) > 1<<20 {
			return
		}
		got, want := ours(b[1:], b[0]%2 == 1), theirs(b[1:], b[0]%2 == 1)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("\n got: %q\nwant: %q", got, want)
		}
	})
}
