package busarchive

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSetSize(t *testing.T) {
	for _, size := range []int64{0, 1, 511, octalSizeLimit - 1, octalSizeLimit, 9 << 30, MaxDataSize} {
		hdr, err := tarHeader(DataEntry("S"), size, time.Unix(1700000000, 0))
		if err != nil {
			t.Fatal(err)
		}
		h, err := tar.NewReader(bytes.NewReader(hdr)).Next()
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if h.Size != size || h.Name != DataEntry("S") || h.Typeflag != tar.TypeReg {
			t.Fatalf("size %d: read back %d %q %q", size, h.Size, h.Name, h.Typeflag)
		}
		if big := hdr[len(hdr)-blockSize+124] == 0x80; big != (size >= octalSizeLimit) {
			t.Fatalf("size %d: base-256 is %v", size, big)
		}
	}
}

// TestOpenHugeEntry opens a sparse archive whose data entry is 9 GiB: the
// header's base-256 size is read and the data is seeked over, not read.
func TestOpenHugeEntry(t *testing.T) {
	const size = int64(9) << 30
	path := filepath.Join(t.TempDir(), "bus.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	when := time.Unix(1700000000, 0).UTC()
	hdr, err := tarHeader(DataEntry("BIG"), size, when)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(hdr)
	off := int64(len(hdr)) + size + padding(size)
	meta := []byte(`{"config":{"name":"BIG"},"state":{}}`)
	var tail bytes.Buffer
	mh, _ := tarHeader(MetaEntry("BIG"), int64(len(meta)), when)
	tail.Write(mh)
	tail.Write(meta)
	tail.Write(make([]byte, padding(int64(len(meta)))))
	m := &Manifest{Format: 1, Created: when, Streams: []StreamManifest{{
		Name: "BIG", Entries: []EntrySum{
			{Name: DataEntry("BIG"), Size: size, SHA256: sum64("0")},
			{Name: MetaEntry("BIG"), Size: int64(len(meta)), SHA256: sum64("1")},
		}}}}
	m.Streams[0].Config.Name = "BIG"
	mb, err := sealManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	manh, _ := tarHeader(ManifestName, int64(len(mb)), when)
	tail.Write(manh)
	tail.Write(mb)
	tail.Write(make([]byte, padding(int64(len(mb)))+2*blockSize))
	if _, err := f.WriteAt(tail.Bytes(), off); err != nil {
		t.Fatal(err)
	}
	a, err := Open(f, off+int64(tail.Len()))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if loc := a.entries[DataEntry("BIG")]; loc.size != size || loc.off != int64(len(hdr)) {
		t.Fatalf("data entry at %+v", loc)
	}
}

func sum64(c string) string { return string(bytes.Repeat([]byte(c), 64)) }
