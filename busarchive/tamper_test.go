package busarchive_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
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
			off, size := tartest.DataRange(t, b, name)
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
	mOff, mSize := tartest.DataRange(t, g, "manifest.json")
	for cut := int64(0); cut < mOff+mSize; cut += 256 {
		err := openVerify(g[:cut])
		ps := busarchive.Problems(err)
		if len(ps) != 1 || !errors.Is(ps[0], busarchive.ErrIncomplete) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	err := openVerify(g[:mOff+mSize-1])
	expectProblems(t, err, problem{"manifest.json", busarchive.ErrIncomplete})
	dOff, dSize := tartest.DataRange(t, g, evData)
	err = openVerify(g[:dOff+dSize/2])
	expectProblems(t, err, problem{evData, busarchive.ErrIncomplete})
}

func TestTamperMissingManifest(t *testing.T) {
	es := tartest.Entries(t, golden(t))
	b := tartest.Bytes(t, es[:len(es)-1])
	expectProblems(t, openVerify(b), problem{"manifest.json", busarchive.ErrIncomplete})
}

func TestTamperExtraEntry(t *testing.T) {
	es := tartest.Entries(t, golden(t))
	last := len(es) - 1
	for _, c := range []struct {
		name  string
		entry tartest.Entry
		after bool
		want  []problem
	}{
		{"outside the layout", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "streams/EVENTS/notes.txt", Mode: 0o600}, Data: []byte("hi")}, false,
			[]problem{{"streams/EVENTS/notes.txt", busarchive.ErrLayout}}},
		{"a stream the manifest lacks", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "streams/OTHER/backup.json", Mode: 0o600}, Data: []byte("{}")}, false,
			[]problem{{"streams/OTHER/backup.json", busarchive.ErrLayout}}},
		{"after the manifest", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "streams/LATE/backup.json", Mode: 0o600}, Data: []byte("{}")}, true,
			[]problem{{"streams/LATE/backup.json", busarchive.ErrLayout}, {"streams/LATE/backup.json", busarchive.ErrLayout}}},
		{"symlink", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeSymlink, Name: "streams/EVENTS/link", Linkname: "/etc/passwd"}, Data: nil}, false,
			[]problem{{"streams/EVENTS/link", busarchive.ErrLayout}}},
		{"hardlink", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeLink, Name: "streams/X/backup.json", Linkname: evMeta}, Data: nil}, false,
			[]problem{{"streams/X/backup.json", busarchive.ErrLayout}}},
		{"dot-dot", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "../../etc/cron.d/evil", Mode: 0o600}, Data: []byte("x")}, false,
			[]problem{{"../../etc/cron.d/evil", busarchive.ErrLayout}}},
		{"absolute", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: "/streams/EVENTS/backup.json", Mode: 0o600}, Data: []byte("x")}, false,
			[]problem{{"/streams/EVENTS/backup.json", busarchive.ErrLayout}}},
		{"backslash", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeReg, Name: `streams\EVENTS\backup.json`, Mode: 0o600}, Data: []byte("x")}, false,
			[]problem{{`streams\EVENTS\backup.json`, busarchive.ErrLayout}}},
		{"directory", tartest.Entry{Hdr: &tar.Header{Typeflag: tar.TypeDir, Name: "streams/", Mode: 0o700}, Data: nil}, false,
			[]problem{{"streams/", busarchive.ErrLayout}}},
		{"duplicate", es[5], false,
			[]problem{{evMeta, busarchive.ErrLayout}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var list []tartest.Entry
			if c.after {
				list = append(append(list, es...), c.entry)
			} else {
				list = append(append(append(list, es[:last]...), c.entry), es[last])
			}
			expectProblems(t, openVerify(tartest.Bytes(t, list)), c.want...)
		})
	}
}

func TestTamperEnormousSizes(t *testing.T) {
	g := golden(t)
	es := tartest.Entries(t, g)
	m := es[len(es)-1].Data
	huge := bytes.Replace(m, []byte(fmt.Sprintf(`"size": %d,`, es[4].Hdr.Size)), []byte(`"size": 4611686018427387904,`), 1)
	if bytes.Equal(huge, m) {
		t.Fatal("the EVENTS data size was not found in the manifest")
	}
	t.Run("resealed manifest", func(t *testing.T) {
		es[len(es)-1].Data = tartest.Reseal(huge)
		expectProblems(t, openVerify(tartest.Bytes(t, es)), problem{evData, busarchive.ErrTooLarge})
	})
	t.Run("unsealed manifest", func(t *testing.T) {
		es[len(es)-1].Data = huge
		expectProblems(t, openVerify(tartest.Bytes(t, es)), problem{"manifest.json", busarchive.ErrChecksum}, problem{evData, busarchive.ErrTooLarge})
	})
	t.Run("tar header", func(t *testing.T) {
		// The EVENTS data entry's tar header claims 2 TiB (base-256).
		b := bytes.Clone(g)
		off, _ := tartest.DataRange(t, b, evData)
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
	es := tartest.Entries(t, golden(t))
	es[0].Data, es[4].Data = es[4].Data, es[0].Data
	expectProblems(t, openVerify(tartest.Bytes(t, es)), problem{kvData, busarchive.ErrChecksum}, problem{evData, busarchive.ErrChecksum})
}

// A manifest (resealed) whose state disagrees with the snapshot's own
// state.json and messages: Verify finds both disagreements.
func TestTamperStateMismatch(t *testing.T) {
	es := tartest.Entries(t, golden(t))
	m := es[len(es)-1].Data
	i := bytes.Index(m, []byte(`"name": "EVENTS"`))
	j := bytes.Index(m[i:], []byte(`"messages": 20,`))
	if i < 0 || j < 0 {
		t.Fatal("the EVENTS state was not found in the manifest")
	}
	m = bytes.Clone(m)
	copy(m[i+j:], `"messages": 19,`)
	es[len(es)-1].Data = tartest.Reseal(m)
	expectProblems(t, openVerify(tartest.Bytes(t, es)), problem{evData, busarchive.ErrMismatch}, problem{evData, busarchive.ErrMismatch})
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
