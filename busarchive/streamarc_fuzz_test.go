package busarchive_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/metrics"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// FuzzReadStreamArchive feeds ReadStreamArchive, and BumpLastSeq, arbitrary
// stream archives. They must never panic nor allocate without bound, and an
// archive that reads whole reads the same messages once bumped. CI runs it
// for a short fixed time as FuzzOpenVerify.
func FuzzReadStreamArchive(f *testing.F) {
	for _, s := range []string{"EVENTS", "KV_fixture"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "natsbackup", "v0.5.0", s, "stream.arc.s2"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(100))
		f.Add(b[:len(b)/2], uint64(3))
	}
	w := writeArc(f, arcHead(1), arcMessages())
	f.Add(w, uint64(20))
	f.Add(w, uint64(2))
	flipped := bytes.Clone(w)
	flipped[len(flipped)/2] ^= 0x40
	f.Add(flipped, uint64(20))
	f.Add([]byte{}, uint64(1))

	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	f.Fuzz(func(t *testing.T, b []byte, last uint64) {
		if len(b) > 4<<20 {
			return
		}
		metrics.Read(sample)
		before := sample[0].Value.Uint64()
		msgs, err := readAll(bytes.NewReader(b))
		bumped, berr := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(b), last))
		metrics.Read(sample)
		if n := sample[0].Value.Uint64() - before; n > 256<<20 {
			t.Fatalf("reading and bumping %d bytes allocated %d bytes", len(b), n)
		}
		if err != nil || berr != nil {
			return
		}
		again, err := readAll(bytes.NewReader(bumped))
		if err != nil {
			t.Fatalf("the archive reads, bumped to %d it does not: %v", last, err)
		}
		if !reflect.DeepEqual(msgs, again) {
			t.Fatalf("bumped to %d the archive reads other messages", last)
		}
	})
}

func readAll(r io.Reader) ([]string, error) {
	var out []string
	_, err := busarchive.ReadStreamArchive(r, func(name string, entry []byte) error {
		out = append(out, name+" "+string(entry))
		return nil
	}, func(m busarchive.ArchivedMessage) error {
		out = append(out, fmt.Sprintf("%d %d %q %q %q", m.Seq, m.Time, m.Subject, m.Header, m.Data))
		return nil
	})
	return out, err
}
