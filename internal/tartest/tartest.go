// Package tartest takes bus.tar archives apart and puts them back together,
// for tests that damage a good archive in one precise way.
//
// It imports only the standard library.
package tartest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
)

// Entry is one entry of a tar: its header and its data.
type Entry struct {
	Hdr  *tar.Header
	Data []byte
}

// Entries reads every entry of the tar in b.
func Entries(t testing.TB, b []byte) []Entry {
	t.Helper()
	var out []Entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		d, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Entry{h, d})
	}
}

// Bytes writes the entries as a tar; a regular entry's size is its data's.
func Bytes(t testing.TB, es []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := *e.Hdr
		h.Size = int64(len(e.Data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(e.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// DataRange is where the data of the named entry lies in b: offset and size.
func DataRange(t testing.TB, b []byte, name string) (int64, int64) {
	t.Helper()
	r := bytes.NewReader(b)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no entry %s: %v", name, err)
		}
		if h.Name == name {
			return int64(len(b)) - int64(r.Len()), h.Size
		}
	}
}

// Reseal recomputes manifest.json's seal over the bytes before it, the way
// the writer makes it, so a test can change the manifest and still pass
// its own check.
func Reseal(m []byte) []byte {
	const sealPrefix = ",\n  \"seal\": \""
	cut := len(m) - (len(sealPrefix) + 64 + len("\"\n}\n"))
	body := append(bytes.Clone(m[:cut]), "\n}"...)
	sum := sha256.Sum256(body)
	return append(bytes.Clone(m[:cut]), []byte(sealPrefix+hex.EncodeToString(sum[:])+"\"\n}\n")...)
}

// LargestData names the largest stream.arc.s2 entry of the tar in b.
func LargestData(t testing.TB, b []byte) string {
	t.Helper()
	best, size := "", int64(-1)
	for _, e := range Entries(t, b) {
		if strings.HasSuffix(e.Hdr.Name, "/stream.arc.s2") && e.Hdr.Size > size {
			best, size = e.Hdr.Name, e.Hdr.Size
		}
	}
	if best == "" {
		t.Fatal("the archive holds no stream.arc.s2")
	}
	return best
}
