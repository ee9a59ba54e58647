package busarchive_test

import (
	"bytes"
	"crypto/sha256"
	"reflect"
	"runtime/metrics"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// FuzzDecodeKeyIndex feeds DecodeKeyIndex arbitrary indexes, each with its
// whole SHA-256 made right, so that what follows the check is reached. It
// must never panic nor allocate without bound, and what it decodes encodes
// again to an index that decodes to the same.
func FuzzDecodeKeyIndex(f *testing.F) {
	data := writeArc(f, arcHead(1), arcMessages())
	ix, err := buildIndex(f, arcStream, data, keepArc)
	if err != nil {
		f.Fatal(err)
	}
	enc, err := ix.Encode()
	if err != nil {
		f.Fatal(err)
	}
	body := enc[:len(enc)-sha256.Size]
	f.Add(body)
	f.Add(body[:len(body)/2])
	flipped := bytes.Clone(body)
	flipped[len(flipped)-70] ^= 0x01
	f.Add(flipped)
	f.Add([]byte("NKKEYIDX"))
	f.Add([]byte("NKKEYIDX\x01\x03ARC\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))

	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		sum := sha256.Sum256(b)
		in := append(bytes.Clone(b), sum[:]...)
		metrics.Read(sample)
		before := sample[0].Value.Uint64()
		ix, err := busarchive.DecodeKeyIndex(in)
		metrics.Read(sample)
		if n := sample[0].Value.Uint64() - before; n > uint64(64*len(in)+1<<20) {
			t.Fatalf("decoding %d bytes allocated %d bytes", len(in), n)
		}
		if err != nil {
			return
		}
		again, err := ix.Encode()
		if err != nil {
			t.Fatalf("a decoded index does not encode: %v", err)
		}
		ix2, err := busarchive.DecodeKeyIndex(again)
		if err != nil {
			t.Fatalf("a decoded index, encoded again, does not decode: %v", err)
		}
		if !reflect.DeepEqual(ix, ix2) {
			t.Fatal("a decoded index, encoded again, decodes to another")
		}
	})
}
