package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one entry of a tar re-made by a damage.
type entry struct {
	hdr  *tar.Header
	data []byte
}

func tarEntries(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
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
		out = append(out, entry{h, d})
	}
}

func tarBytes(t *testing.T, es []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := *e.hdr
		h.Size = int64(len(e.data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dataRange is where the data of the named entry lies in b.
func dataRange(t *testing.T, b []byte, name string) (int64, int64) {
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

// biggestData is the name of the largest stream.arc.s2 entry.
func biggestData(t *testing.T, b []byte) string {
	t.Helper()
	best, size := "", int64(-1)
	for _, e := range tarEntries(t, b) {
		if strings.HasSuffix(e.hdr.Name, "/stream.arc.s2") && e.hdr.Size > size {
			best, size = e.hdr.Name, e.hdr.Size
		}
	}
	return best
}

// withEntry puts extra just before the manifest (the last entry).
func withEntry(t *testing.T, b []byte, extra entry) []byte {
	t.Helper()
	es := tarEntries(t, b)
	last := len(es) - 1
	out := append(append(append([]entry{}, es[:last]...), extra), es[last])
	return tarBytes(t, out)
}

// seal recomputes manifest.json's seal over the bytes before it.
func seal(m []byte) []byte {
	const sealPrefix = ",\n  \"seal\": \""
	cut := len(m) - (len(sealPrefix) + 64 + len("\"\n}\n"))
	body := append(bytes.Clone(m[:cut]), "\n}"...)
	sum := sha256.Sum256(body)
	return append(bytes.Clone(m[:cut]), []byte(sealPrefix+hex.EncodeToString(sum[:])+"\"\n}\n")...)
}

// damages are the ways a real point's bus.tar is broken: name → the damaged
// archive made from the good one.
func damages(t *testing.T, good []byte) map[string][]byte {
	t.Helper()
	big := biggestData(t, good)
	es := tarEntries(t, good)
	manifest := es[len(es)-1].data
	var bigSize int64
	for _, e := range es {
		if e.hdr.Name == big {
			bigSize = int64(len(e.data))
		}
	}
	hugeManifest := bytes.Replace(manifest, fmt.Appendf(nil, `"size": %d,`, bigSize), []byte(`"size": 4611686018427387904,`), 1)
	if bytes.Equal(hugeManifest, manifest) {
		t.Fatalf("the size of %s (%d) is not in the manifest", big, bigSize)
	}
	withManifest := func(m []byte) []byte {
		c := append([]entry{}, es...)
		c[len(c)-1] = entry{c[len(c)-1].hdr, m}
		return tarBytes(t, c)
	}

	out := map[string][]byte{}
	{ // one flipped bit in the middle of the largest stream's data
		b := bytes.Clone(good)
		off, size := dataRange(t, b, big)
		b[off+size/2] ^= 0x01
		out["flipped-byte"] = b
	}
	{ // one flipped bit in the manifest
		b := bytes.Clone(good)
		off, size := dataRange(t, b, "manifest.json")
		b[off+size/3] ^= 0x04
		out["flipped-manifest"] = b
	}
	out["truncated-half"] = bytes.Clone(good[:len(good)/2])
	{
		off, size := dataRange(t, good, "manifest.json")
		out["truncated-in-manifest"] = bytes.Clone(good[:off+size-10])
	}
	out["no-manifest"] = tarBytes(t, es[:len(es)-1])
	out["extra-entry"] = withEntry(t, good, entry{&tar.Header{Typeflag: tar.TypeReg, Name: "streams/host_data/notes.txt", Mode: 0o600}, []byte("hello")})
	out["extra-stream"] = withEntry(t, good, entry{&tar.Header{Typeflag: tar.TypeReg, Name: "streams/EVIL/backup.json", Mode: 0o600}, []byte("{}")})
	out["duplicate-entry"] = withEntry(t, good, es[0])
	out["symlink-entry"] = withEntry(t, good, entry{&tar.Header{Typeflag: tar.TypeSymlink, Name: "streams/host_data/link", Linkname: "/etc/passwd"}, nil})
	out["hardlink-entry"] = withEntry(t, good, entry{&tar.Header{Typeflag: tar.TypeLink, Name: "streams/host_data/hard", Linkname: es[0].hdr.Name}, nil})
	out["dotdot-entry"] = withEntry(t, good, entry{&tar.Header{Typeflag: tar.TypeReg, Name: "../../../tmp/evil", Mode: 0o600}, []byte("x")})
	out["absolute-entry"] = withEntry(t, good, entry{&tar.Header{Typeflag: tar.TypeReg, Name: "/tmp/evil", Mode: 0o600}, []byte("x")})
	out["huge-size-unsealed"] = withManifest(hugeManifest)
	out["huge-size-resealed"] = withManifest(seal(hugeManifest))
	{ // the largest data entry's tar header claims 2 TiB (base-256)
		b := bytes.Clone(good)
		off, _ := dataRange(t, b, big)
		h := b[off-512 : off]
		clear(h[124:136])
		h[124] = 0x80
		binary.BigEndian.PutUint64(h[128:136], 2<<40)
		copy(h[148:156], "        ")
		sum := 0
		for _, c := range h {
			sum += int(c)
		}
		copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
		out["huge-size-tar-header"] = b
	}
	return out
}

// plantPoint writes a copy of the point in src as a point of fingerprint fp
// under dst's kept data, with bus.tar replaced by archive (nil keeps it).
func plantPoint(t *testing.T, src, dir, module, local, fp string, archive []byte) string {
	t.Helper()
	var p map[string]any
	b, err := os.ReadFile(filepath.Join(src, "point.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join("points", module, local, "f1-"+fp)
	p["fingerprint"], p["dir"] = fp, rel
	if archive == nil {
		if archive, err = os.ReadFile(filepath.Join(src, "bus.tar")); err != nil {
			t.Fatal(err)
		}
	} else {
		delete(p, "archive_sha256") // only the archive itself is damaged
		p["archive_size"] = len(archive)
	}
	dst := filepath.Join(dir, rel)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	pj, _ := json.MarshalIndent(p, "", "  ")
	if err := os.WriteFile(filepath.Join(dst, "point.json"), pj, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "bus.tar"), archive, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}
