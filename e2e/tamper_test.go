package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/tartest"
)

// withEntry puts extra just before the manifest (the last entry).
func withEntry(t *testing.T, b []byte, extra tartest.Entry) []byte {
	t.Helper()
	es := tartest.Entries(t, b)
	last := len(es) - 1
	out := append(append(append([]tartest.Entry{}, es[:last]...), extra), es[last])
	return tartest.Bytes(t, out)
}

// damages are the ways a real point's bus.tar is broken: name → the damaged
// archive made from the good one.
func damages(t *testing.T, good []byte) map[string][]byte {
	t.Helper()
	big := tartest.LargestData(t, good)
	es := tartest.Entries(t, good)
	manifest := es[len(es)-1].Data
	var bigSize int64
	for _, e := range es {
		if e.Hdr.Name == big {
			bigSize = int64(len(e.Data))
		}
	}
	hugeManifest := bytes.Replace(manifest, fmt.Appendf(nil, `"size": %d,`, bigSize), []byte(`"size": 4611686018427387904,`), 1)
	if bytes.Equal(hugeManifest, manifest) {
		t.Fatalf("the size of %s (%d) is not in the manifest", big, bigSize)
	}
	withManifest := func(m []byte) []byte {
		c := append([]tartest.Entry{}, es...)
		c[len(c)-1] = tartest.Entry{Hdr: c[len(c)-1].Hdr, Data: m}
		return tartest.Bytes(t, c)
	}

	out := map[string][]byte{}
	{ // one flipped bit in the middle of the largest stream's data
		b := bytes.Clone(good)
		off, size := tartest.DataRange(t, b, big)
		b[off+size/2] ^= 0x01
		out["flipped-byte"] = b
	}
	{ // one flipped bit in the manifest
		b := bytes.Clone(good)
		off, size := tartest.DataRange(t, b, "manifest.json")
		b[off+size/3] ^= 0x04
		out["flipped-manifest"] = b
	}
	out["truncated-half"] = bytes.Clone(good[:len(good)/2])
	{
		off, size := tartest.DataRange(t, good, "manifest.json")
		out["truncated-in-manifest"] = bytes.Clone(good[:off+size-10])
	}
	out["no-manifest"] = tartest.Bytes(t, es[:len(es)-1])
	out["extra-entry"] = withEntry(t, good, tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "streams/host_data/notes.txt", Mode: 0o600}, Data: []byte("hello")})
	out["extra-stream"] = withEntry(t, good, tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "streams/EVIL/backup.json", Mode: 0o600}, Data: []byte("{}")})
	out["duplicate-entry"] = withEntry(t, good, es[0])
	out["symlink-entry"] = withEntry(t, good, tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeSymlink, Name: "streams/host_data/link", Linkname: "/etc/passwd"}, Data: nil})
	out["hardlink-entry"] = withEntry(t, good, tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeLink, Name: "streams/host_data/hard", Linkname: es[0].Hdr.Name}, Data: nil})
	out["dotdot-entry"] = withEntry(t, good, tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "../../../tmp/evil", Mode: 0o600}, Data: []byte("x")})
	out["absolute-entry"] = withEntry(t, good, tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "/tmp/evil", Mode: 0o600}, Data: []byte("x")})
	out["huge-size-unsealed"] = withManifest(hugeManifest)
	out["huge-size-resealed"] = withManifest(tartest.Reseal(hugeManifest))
	{ // the largest data entry's tar header claims 2 TiB (base-256)
		b := bytes.Clone(good)
		off, _ := tartest.DataRange(t, b, big)
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
	// Only point.json and bus.tar are planted: the point is one without key
	// indexes, as an older keeper's or an import is.
	if streams, ok := p["streams"].([]any); ok {
		for _, s := range streams {
			if m, ok := s.(map[string]any); ok {
				delete(m, "key-index")
			}
		}
	}
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
