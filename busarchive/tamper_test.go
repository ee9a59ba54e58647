package busarchive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// problem is one expected problem: the entry it names and its kind.
type problem struct {
	entry string
	kind  error
}

func (p problem) String() string { return fmt.Sprintf("%s: %v", p.entry, p.kind) }

// openVerify opens an archive held in memory and verifies it, as a restore
// would before touching the bus.
func openVerify(b []byte) error {
	a, err := busarchive.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return err
	}
	_, err = a.Verify(context.Background())
	return err
}

// expectProblems fails unless err is exactly the listed problems, in order.
func expectProblems(t *testing.T, err error, want ...problem) {
	t.Helper()
	got := busarchive.Problems(err)
	var gs, ws []string
	for _, p := range got {
		gs = append(gs, problem{p.Entry, p.Kind}.String())
	}
	for _, p := range want {
		ws = append(ws, p.String())
	}
	if strings.Join(gs, "\n") != strings.Join(ws, "\n") {
		t.Fatalf("problems:\n  %s\nwant:\n  %s\nerror: %v", strings.Join(gs, "\n  "), strings.Join(ws, "\n  "), err)
	}
	for i, p := range got {
		if !errors.Is(err, want[i].kind) || p.Detail == "" {
			t.Fatalf("problem %v is not found by errors.Is or has no detail", p)
		}
	}
}

func golden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := openVerify(b); err != nil {
		t.Fatalf("the golden archive itself does not verify: %v", err)
	}
	return b
}

// tarEntry is one entry of a re-made tar.
type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func readEntries(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
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
		out = append(out, tarEntry{h, d})
	}
}

func writeEntries(t *testing.T, es []tarEntry) []byte {
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
			tw.Write(e.data)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// entryRange finds where an entry's data lies in b.
func entryRange(t *testing.T, b []byte, name string) (int64, int64) {
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

// reseal recomputes manifest.json's seal the way the writer makes it.
func reseal(t *testing.T, m []byte) []byte {
	t.Helper()
	const sealLen = len(",\n  \"seal\": \"") + 64 + len("\"\n}\n")
	body := append(bytes.Clone(m[:len(m)-sealLen]), "\n}"...)
	sum := sha256.Sum256(body)
	return append(bytes.Clone(m[:len(m)-sealLen]), []byte(",\n  \"seal\": \""+hex.EncodeToString(sum[:])+"\"\n}\n")...)
}

const (
	evData = "streams/EVENTS/stream.arc.s2"
	evMeta = "streams/EVENTS/backup.json"
	kvData = "streams/KV_fixture/stream.arc.s2"
)

func TestTamperFlippedByte(t *testing.T) {
	g := golden(t)
	for _, name := range []string{kvData, "streams/KV_fixture/backup.json", "streams/OBJ_files/stream.arc.s2", "streams/OBJ_files/backup.json", evData, evMeta, "manifest.json"} {
		t.Run(name, func(t *testing.T) {
			b := bytes.Clone(g)
			off, size := entryRange(t, b, name)
			data := b[off : off+size]
			switch {
			case strings.HasSuffix(name, ".s2"):
				// A byte in the middle of compressed data: the hash and the
				// s2 chunk's CRC both catch it.
				data[size/2] ^= 0x01
				err := openVerify(b)
				expectProblems(t, err, problem{name, busarchive.ErrChecksum}, problem{name, busarchive.ErrFormat})
			case strings.HasSuffix(name, ".json") && name != "manifest.json":
				// One bit of a key's letter: the JSON still parses the same
				// (Go matches keys without case), only the hash sees it.
				i := bytes.Index(data, []byte(`"subjects"`))
				data[i+1] ^= 0x20
				err := openVerify(b)
				expectProblems(t, err, problem{name, busarchive.ErrChecksum})
			default:
				// One bit of the keeper's version in the manifest: only the
				// seal sees it, and Open refuses.
				i := bytes.Index(data, []byte(`"keeper_version": "test"`))
				data[i+len(`"keeper_version": "`)] ^= 0x20
				_, err := busarchive.Open(bytes.NewReader(b), int64(len(b)))
				expectProblems(t, err, problem{name, busarchive.ErrChecksum})
			}
		})
	}
}

func TestTamperTruncated(t *testing.T) {
	g := golden(t)
	// Cut at every block and in the middle of every block up to the end of
	// manifest.json's data: every cut is found incomplete, and nothing else.
	mOff, mSize := entryRange(t, g, "manifest.json")
	for cut := int64(0); cut < mOff+mSize; cut += 256 {
		err := openVerify(g[:cut])
		ps := busarchive.Problems(err)
		if len(ps) != 1 || !errors.Is(ps[0], busarchive.ErrIncomplete) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	err := openVerify(g[:mOff+mSize-1])
	expectProblems(t, err, problem{"manifest.json", busarchive.ErrIncomplete})
	dOff, dSize := entryRange(t, g, evData)
	err = openVerify(g[:dOff+dSize/2])
	expectProblems(t, err, problem{evData, busarchive.ErrIncomplete})
}

func TestTamperMissingManifest(t *testing.T) {
	es := readEntries(t, golden(t))
	b := writeEntries(t, es[:len(es)-1])
	expectProblems(t, openVerify(b), problem{"manifest.json", busarchive.ErrIncomplete})
}

func TestTamperExtraEntry(t *testing.T) {
	es := readEntries(t, golden(t))
	last := len(es) - 1
	for _, c := range []struct {
		name  string
		entry tarEntry
		after bool
		want  []problem
	}{
		{"outside the layout", tarEntry{&tar.Header{Typeflag: tar.TypeReg, Name: "streams/EVENTS/notes.txt", Mode: 0o600}, []byte("hi")}, false,
			[]problem{{"streams/EVENTS/notes.txt", busarchive.ErrLayout}}},
		{"a stream the manifest lacks", tarEntry{&tar.Header{Typeflag: tar.TypeReg, Name: "streams/OTHER/backup.json", Mode: 0o600}, []byte("{}")}, false,
			[]problem{{"streams/OTHER/backup.json", busarchive.ErrLayout}}},
		{"after the manifest", tarEntry{&tar.Header{Typeflag: tar.TypeReg, Name: "streams/LATE/backup.json", Mode: 0o600}, []byte("{}")}, true,
			[]problem{{"streams/LATE/backup.json", busarchive.ErrLayout}, {"streams/LATE/backup.json", busarchive.ErrLayout}}},
		{"symlink", tarEntry{&tar.Header{Typeflag: tar.TypeSymlink, Name: "streams/EVENTS/link", Linkname: "/etc/passwd"}, nil}, false,
			[]problem{{"streams/EVENTS/link", busarchive.ErrLayout}}},
		{"hardlink", tarEntry{&tar.Header{Typeflag: tar.TypeLink, Name: "streams/X/backup.json", Linkname: evMeta}, nil}, false,
			[]problem{{"streams/X/backup.json", busarchive.ErrLayout}}},
		{"dot-dot", tarEntry{&tar.Header{Typeflag: tar.TypeReg, Name: "../../etc/cron.d/evil", Mode: 0o600}, []byte("x")}, false,
			[]problem{{"../../etc/cron.d/evil", busarchive.ErrLayout}}},
		{"absolute", tarEntry{&tar.Header{Typeflag: tar.TypeReg, Name: "/streams/EVENTS/backup.json", Mode: 0o600}, []byte("x")}, false,
			[]problem{{"/streams/EVENTS/backup.json", busarchive.ErrLayout}}},
		{"backslash", tarEntry{&tar.Header{Typeflag: tar.TypeReg, Name: `streams\EVENTS\backup.json`, Mode: 0o600}, []byte("x")}, false,
			[]problem{{`streams\EVENTS\backup.json`, busarchive.ErrLayout}}},
		{"directory", tarEntry{&tar.Header{Typeflag: tar.TypeDir, Name: "streams/", Mode: 0o700}, nil}, false,
			[]problem{{"streams/", busarchive.ErrLayout}}},
		{"duplicate", es[5], false,
			[]problem{{evMeta, busarchive.ErrLayout}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var list []tarEntry
			if c.after {
				list = append(append(list, es...), c.entry)
			} else {
				list = append(append(append(list, es[:last]...), c.entry), es[last])
			}
			expectProblems(t, openVerify(writeEntries(t, list)), c.want...)
		})
	}
}

func TestTamperEnormousSizes(t *testing.T) {
	g := golden(t)
	es := readEntries(t, g)
	m := es[len(es)-1].data
	huge := bytes.Replace(m, []byte(fmt.Sprintf(`"size": %d,`, es[4].hdr.Size)), []byte(`"size": 4611686018427387904,`), 1)
	if bytes.Equal(huge, m) {
		t.Fatal("the EVENTS data size was not found in the manifest")
	}
	t.Run("resealed manifest", func(t *testing.T) {
		es[len(es)-1].data = reseal(t, huge)
		expectProblems(t, openVerify(writeEntries(t, es)), problem{evData, busarchive.ErrTooLarge})
	})
	t.Run("unsealed manifest", func(t *testing.T) {
		es[len(es)-1].data = huge
		expectProblems(t, openVerify(writeEntries(t, es)), problem{"manifest.json", busarchive.ErrChecksum}, problem{evData, busarchive.ErrTooLarge})
	})
	t.Run("tar header", func(t *testing.T) {
		// The EVENTS data entry's tar header claims 2 TiB (base-256).
		b := bytes.Clone(g)
		off, _ := entryRange(t, b, evData)
		h := b[off-512 : off]
		clear(h[124:136])
		binary.BigEndian.PutUint64(h[128:136], 2<<40)
		h[124] = 0x80
		copy(h[148:156], "        ")
		var sum int
		for _, c := range h {
			sum += int(c)
		}
		copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
		expectProblems(t, openVerify(b), problem{evData, busarchive.ErrTooLarge})
	})
}

// Two streams' data swapped: sizes and hashes disagree with the manifest,
// and Open refuses before anything is decoded.
func TestTamperSwappedData(t *testing.T) {
	es := readEntries(t, golden(t))
	es[0].data, es[4].data = es[4].data, es[0].data
	expectProblems(t, openVerify(writeEntries(t, es)), problem{kvData, busarchive.ErrChecksum}, problem{evData, busarchive.ErrChecksum})
}

// A manifest (resealed) whose state disagrees with the snapshot's own
// state.json and messages: Verify finds both disagreements.
func TestTamperStateMismatch(t *testing.T) {
	es := readEntries(t, golden(t))
	m := es[len(es)-1].data
	i := bytes.Index(m, []byte(`"name": "EVENTS"`))
	j := bytes.Index(m[i:], []byte(`"messages": 20,`))
	if i < 0 || j < 0 {
		t.Fatal("the EVENTS state was not found in the manifest")
	}
	m = bytes.Clone(m)
	copy(m[i+j:], `"messages": 19,`)
	es[len(es)-1].data = reseal(t, m)
	expectProblems(t, openVerify(writeEntries(t, es)), problem{evData, busarchive.ErrMismatch}, problem{evData, busarchive.ErrMismatch})
}

// OpenFile never follows a symlink and reads only regular files.
func TestOpenFileRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.tar")
	copyFile(t, goldenPath, real)
	link := filepath.Join(dir, "bus.tar")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := busarchive.OpenFile(link); !errors.Is(err, busarchive.ErrLayout) {
		t.Fatalf("OpenFile through a symlink: %v", err)
	}
	if _, _, err := busarchive.OpenFile(dir); !errors.Is(err, busarchive.ErrLayout) {
		t.Fatalf("OpenFile of a directory: %v", err)
	}
	_, err := busarchive.VerifyFile(context.Background(), filepath.Join(dir, "none.tar"))
	if ps := busarchive.Problems(err); len(ps) != 1 || !errors.Is(err, busarchive.ErrIncomplete) {
		t.Fatalf("VerifyFile of a missing file: %v", err)
	}
	if _, err := busarchive.VerifyFile(context.Background(), real); err != nil {
		t.Fatal(err)
	}
}

// Bytes after the end-of-archive marker (a tar appended to, or junk) are
// refused; the zero padding of a tar record is not.
func TestTamperTrailingBytes(t *testing.T) {
	g := golden(t)
	if err := openVerify(append(bytes.Clone(g), make([]byte, 8*512)...)); err != nil {
		t.Fatalf("zero record padding: %v", err)
	}
	expectProblems(t, openVerify(append(bytes.Clone(g), "junk"...)), problem{"", busarchive.ErrLayout})
}
