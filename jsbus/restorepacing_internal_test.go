package jsbus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
)

// s2Stream is data as an s2 stream the way nats-server writes a snapshot:
// blocks of up to 1 MiB.
func s2Stream(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := s2.NewWriter(&b, s2.WriterBlockSize(1<<20), s2.WriterConcurrency(1))
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// decodeS2 is the bytes an s2 stream decodes to.
func decodeS2(b []byte) ([]byte, error) {
	return io.ReadAll(s2.NewReader(bytes.NewReader(b)))
}

// s2Chunks is the sizes of an s2 stream's data chunks, decoded.
func s2Chunks(t *testing.T, b []byte) []int {
	t.Helper()
	var sizes []int
	for len(b) > 0 {
		typ, n := b[0], int(b[1])|int(b[2])<<8|int(b[3])<<16
		body := b[4 : 4+n]
		b = b[4+n:]
		switch typ {
		case s2Compressed:
			size, err := s2.DecodedLen(body[4:])
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, size)
		case s2Uncompressed:
			sizes = append(sizes, len(body)-4)
		}
	}
	return sizes
}

// snapshotLike is JSON-like text, as consumers' entries are, then random
// bytes, as messages may be.
func snapshotLike(text, random int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	var b bytes.Buffer
	for b.Len() < text {
		b.WriteString(`{"name":"c`)
		b.WriteString(string(rune('a' + r.IntN(26))))
		b.WriteString(`","config":{"ack_policy":"explicit","deliver_policy":"all"},"state":{"ack_floor":{"stream_seq":`)
		b.WriteString(string(rune('0' + r.IntN(10))))
		b.WriteString("}}}\n")
	}
	b.Truncate(text)
	for range random {
		b.WriteByte(byte(r.Uint32()))
	}
	return b.Bytes()
}

// The start of a snapshot is cut into blocks of paceBlock as far as the lead
// reaches (whole chunks of the original), the rest is the original's chunks
// byte for byte, and the whole decodes to the same bytes.
func TestPaceStartCutsTheStart(t *testing.T) {
	data := snapshotLike(3<<20, 2<<20)
	orig := s2Stream(t, data)
	for _, lead := range []int{1, 300 << 10, 1 << 20, 2<<20 + 1, 8 << 20} {
		r, head, err := paceStart(bytes.NewReader(orig), lead)
		if err != nil {
			t.Fatalf("lead %d: %v", lead, err)
		}
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeS2(out)
		if err != nil {
			t.Fatalf("lead %d: the re-cut stream does not decode: %v", lead, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("lead %d: the re-cut stream decodes to %d other bytes", lead, len(got))
		}
		if !bytes.HasSuffix(orig, out[head:]) {
			t.Fatalf("lead %d: what follows the %d bytes of the re-cut start is not the original's end", lead, head)
		}
		cut := s2Chunks(t, out[:head])
		total := 0
		for i, n := range cut {
			if n > paceBlock || (n < paceBlock && i < len(cut)-1) {
				t.Fatalf("lead %d: block %d of the start holds %d bytes (blocks: %v)", lead, i+1, n, cut)
			}
			total += n
		}
		// Whole chunks of 1 MiB are cut, as many as reach the lead.
		if want := min(len(data), (lead+1<<20-1)/(1<<20)*(1<<20)); total != want {
			t.Errorf("lead %d: %d decoded bytes were cut, want %d", lead, total, want)
		}
	}
}

// A start that does not read as s2 is sent as it was, with the reason.
func TestPaceStartGivesBackWhatItCannotRead(t *testing.T) {
	good := s2Stream(t, snapshotLike(64<<10, 64<<10))
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0xff
	badCRC := bytes.Clone(good)
	binary.LittleEndian.PutUint32(badCRC[14:], 0) // the first data chunk's checksum, after the 10-byte identifier
	for name, in := range map[string][]byte{
		"empty":                {},
		"not s2":               []byte("this is not an s2 stream at all"),
		"cut in a header":      good[:12],
		"cut in a chunk":       good[:len(good)-5],
		"a damaged block":      corrupt,
		"a block's checksum":   badCRC,
		"a reserved chunk":     append(bytes.Clone(good[:10]), 0x02, 1, 0, 0, 9),
		"a chunk over a block": append(bytes.Clone(good[:10]), 0x00, 0xff, 0xff, 0xff),
		"no identifier first":  good[10:],
		"a wrong identifier":   append([]byte{0xff, 6, 0, 0}, []byte("NoTs2!")...),
	} {
		r, head, err := paceStart(bytes.NewReader(in), 1<<20)
		out, rerr := io.ReadAll(r)
		if rerr != nil {
			t.Fatalf("%s: %v", name, rerr)
		}
		if !bytes.Equal(out, in) || head != 0 {
			t.Errorf("%s: %d bytes (head %d) given back for %d", name, len(out), head, len(in))
		}
		if len(in) > 0 && !errors.Is(err, errNotS2) {
			t.Errorf("%s: err %v, want errNotS2", name, err)
		}
	}
}

// Any input: the bytes given back decode as the input does, or are the
// input itself.
func FuzzPaceStart(f *testing.F) {
	f.Add(s2Stream(f, snapshotLike(40<<10, 30<<10)), 20000)
	f.Add([]byte{0xff, 6, 0, 0, 'S', '2', 's', 'T', 'w', 'O', 0x01, 8, 0, 0, 1, 2, 3, 4, 'a', 'b', 'c', 'd'}, 1)
	f.Fuzz(func(t *testing.T, in []byte, lead int) {
		lead = max(1, lead%(1<<20))
		r, head, err := paceStart(bytes.NewReader(in), lead)
		out, rerr := io.ReadAll(r)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil || head == 0 {
			if head != 0 || (err != nil && !bytes.Equal(out, in)) {
				t.Fatalf("given up (%v) with head %d, and %d bytes given back for %d", err, head, len(out), len(in))
			}
			return
		}
		want, werr := decodeS2(in)
		got, gerr := decodeS2(out)
		if werr == nil && (gerr != nil || !bytes.Equal(got, want)) {
			t.Fatalf("the input decodes, the re-cut stream does not to the same (%v)", gerr)
		}
	})
}

// pacedReader hands out at most small bytes a read until lead bytes went.
func TestPacedReader(t *testing.T) {
	p := &pacedReader{r: bytes.NewReader(make([]byte, 100)), small: 16, lead: 40}
	var sizes []int
	buf := make([]byte, 64)
	for {
		n, err := p.Read(buf)
		if n > 0 {
			sizes = append(sizes, n)
		}
		if err == io.EOF {
			break
		}
	}
	if want := []int{16, 16, 8, 60}; !equalInts(sizes, want) {
		t.Errorf("reads of %v, want %v", sizes, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
