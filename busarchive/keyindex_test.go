package busarchive_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// keepOf is the keeper's choice of what a KV bucket's or an object store's
// index records: each key's last message, each object's last meta, every
// chunk.
func keepOf(stream string) func(string) busarchive.KeepMode {
	return func(subject string) busarchive.KeepMode {
		if b, ok := strings.CutPrefix(stream, "KV_"); ok && strings.HasPrefix(subject, "$KV."+b+".") {
			return busarchive.KeepLast
		}
		if b, ok := strings.CutPrefix(stream, "OBJ_"); ok {
			switch {
			case strings.HasPrefix(subject, "$O."+b+".M."):
				return busarchive.KeepLast
			case strings.HasPrefix(subject, "$O."+b+".C."):
				return busarchive.KeepEvery
			}
		}
		return busarchive.KeepNone
	}
}

// buildIndex feeds data to an Indexer in writes of random sizes, as a
// snapshot arrives.
func buildIndex(t testing.TB, stream string, data []byte, keep func(string) busarchive.KeepMode) (*busarchive.KeyIndex, error) {
	t.Helper()
	x := busarchive.NewIndexer(stream, keep)
	r := rand.New(rand.NewPCG(uint64(len(data)), 1))
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1+r.IntN(300<<10))
		if k, err := x.Write(rest[:n]); k != n || err != nil {
			t.Fatalf("Write took %d of %d bytes: %v", k, n, err)
		}
		rest = rest[n:]
	}
	x.Close()
	return x.Index()
}

// wholeRead is what a whole read of data finds of the messages keep
// chooses, in sequence order: the last of a KeepLast subject, every one of
// a KeepEvery subject.
func wholeRead(t testing.TB, data []byte, keep func(string) busarchive.KeepMode) (*busarchive.ArchiveHead, []busarchive.ArchivedMessage) {
	t.Helper()
	var all []busarchive.ArchivedMessage
	last := map[string]int{}
	head, err := busarchive.ReadStreamArchive(bytes.NewReader(data), nil, func(m busarchive.ArchivedMessage) error {
		switch keep(m.Subject) {
		case busarchive.KeepLast:
			if i, ok := last[m.Subject]; ok {
				all[i].Seq = 0 // superseded
			}
			last[m.Subject] = len(all)
			all = append(all, m)
		case busarchive.KeepEvery:
			all = append(all, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []busarchive.ArchivedMessage
	for _, m := range all {
		if m.Seq != 0 {
			out = append(out, m)
		}
	}
	return head, out
}

// rangeOf reads ranges of data, counting the reads.
func rangeOf(data []byte, reads *int) busarchive.RangeFunc {
	return func(_ context.Context, off, n int64) (io.ReadCloser, error) {
		*reads++
		if off < 0 || off+n > int64(len(data)) {
			return nil, fmt.Errorf("range %d+%d outside %d bytes", off, n, len(data))
		}
		return io.NopCloser(bytes.NewReader(data[off : off+n])), nil
	}
}

// readIndexed reads every message ix records through it.
func readIndexed(ix *busarchive.KeyIndex, read busarchive.RangeFunc) ([]busarchive.ArchivedMessage, error) {
	var out []busarchive.ArchivedMessage
	err := busarchive.ReadIndexed(context.Background(), ix, ix.Messages, read, func(m busarchive.ArchivedMessage) error {
		out = append(out, m)
		return nil
	})
	return out, err
}

// checkIndex checks the index of one stream's snapshot against a whole
// read of it, encoded and decoded again, and every message it records read
// back through it, equal to the whole read's.
func checkIndex(t *testing.T, stream string, data []byte) *busarchive.KeyIndex {
	t.Helper()
	keep := keepOf(stream)
	ix, err := buildIndex(t, stream, data, keep)
	if err != nil {
		t.Fatal(err)
	}
	head, want := wholeRead(t, data, keep)
	if ix.Size != int64(len(data)) || ix.FirstSeq != head.FirstSeq || ix.LastSeq != head.LastSeq || len(ix.Messages) != len(want) || len(ix.Chunks) == 0 {
		t.Fatalf("%s: index of %d bytes, seqs %d..%d, %d messages, %d chunks; the archive is %d bytes, seqs %d..%d, %d messages chosen",
			stream, ix.Size, ix.FirstSeq, ix.LastSeq, len(ix.Messages), len(ix.Chunks), len(data), head.FirstSeq, head.LastSeq, len(want))
	}
	for i, m := range ix.Messages {
		w := want[i]
		if m.Seq != w.Seq || m.Subject != w.Subject || m.Time != w.Time || !bytes.Equal(m.Header, w.Header) || m.DataSum != sha256.Sum256(w.Data) {
			t.Fatalf("%s: indexed message %d is %d %q, the whole read's %d %q", stream, i, m.Seq, m.Subject, w.Seq, w.Subject)
		}
	}
	enc, err := ix.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := busarchive.DecodeKeyIndex(enc)
	if err != nil {
		t.Fatalf("%s: the encoded index does not decode: %v", stream, err)
	}
	reads := 0
	got, err := readIndexed(again, rangeOf(data, &reads))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages read through the index, want %d", stream, len(got), len(want))
	}
	for i := range got {
		if g, w := got[i], want[i]; g.Seq != w.Seq || g.Subject != w.Subject || g.Time != w.Time || !bytes.Equal(g.Header, w.Header) || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s: message %d read through the index differs from the whole read's (seq %d, %q)", stream, i, w.Seq, w.Subject)
		}
	}
	for i, m := range again.Messages { // alone: each its own range, across chunks too
		err := busarchive.ReadIndexed(context.Background(), again, []busarchive.IndexedMessage{m}, rangeOf(data, new(int)), func(g busarchive.ArchivedMessage) error {
			if !bytes.Equal(g.Data, want[i].Data) || !bytes.Equal(g.Header, want[i].Header) {
				return fmt.Errorf("message %d read alone differs from the whole read's", m.Seq)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d bytes, %d chunks, %d messages indexed in %d bytes, read back in %d ranged read(s)", stream, len(data), len(ix.Chunks), len(ix.Messages), len(enc), reads)
	return again
}

func TestKeyIndexOfServerSnapshots(t *testing.T) {
	nc, js := startBus(t)
	makeFixture(t, js)
	makeBigKV(t, js)
	for _, s := range []string{"KV_" + fxBucket, "OBJ_" + fxObjects, "KV_big", fxStream} {
		data, _ := snapshotStream(t, nc, s)
		ix := checkIndex(t, s, data)
		if s == fxStream && len(ix.Messages) != 0 {
			t.Fatalf("a plain stream's index records %d messages", len(ix.Messages))
		}
		if s == "KV_big" && (len(ix.Chunks) < 4 || spanning(ix) == 0) {
			t.Fatalf("KV_big's snapshot is %d chunks, %d messages across two; the test wants several of each", len(ix.Chunks), spanning(ix))
		}
	}
}

// spanning counts the messages that lie across two chunks or more.
func spanning(ix *busarchive.KeyIndex) int {
	n := 0
	for _, m := range ix.Messages {
		if chunkOf(ix, m) != chunkOf(ix, busarchive.IndexedMessage{Off: m.Off + m.Len - 1}) {
			n++
		}
	}
	return n
}

// makeBigKV makes KV_big: 120 keys of 16 KiB random values, three
// revisions each (two kept), a few deleted: a snapshot of several s2
// chunks.
func makeBigKV(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	ctx := testCtx(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "big", History: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 2))
	for round := range 3 {
		for i := range 120 {
			v := make([]byte, 16<<10)
			for j := range v {
				v[j] = byte(r.Uint32())
			}
			if _, err := kv.Put(ctx, fmt.Sprintf("k%03d", i), v); err != nil {
				t.Fatal(err)
			}
			if round == 2 && i%17 == 0 {
				if err := kv.Delete(ctx, fmt.Sprintf("k%03d", i)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestKeyIndexRefusesWhatChanged: a flipped byte in a ranged read (of a
// message's own bytes in an uncompressed chunk, of a compressed chunk), in
// the encoded index, or in what an index records is refused, naming the
// stream and the message.
func TestKeyIndexRefusesWhatChanged(t *testing.T) {
	nc, js := startBus(t)
	makeFixture(t, js)
	makeBigKV(t, js)
	data, _ := snapshotStream(t, nc, "KV_big")
	ix := checkIndex(t, "KV_big", data)
	m := ix.Messages[len(ix.Messages)/2]
	c := chunkOf(ix, m)
	if !c.Raw {
		t.Fatal("KV_big's values are random: its chunks are stored uncompressed")
	}
	flipped := bytes.Clone(data)
	flipped[c.Off+8+m.Off-c.Plain+m.Len-5] ^= 1 // in m's data
	wantReadErr(t, "a byte of a message's data flipped", readOne(ix, m, flipped), m, busarchive.ErrChecksum, "its data's SHA-256 is")

	bad := *ix
	bad.Messages = append([]busarchive.IndexedMessage(nil), ix.Messages...)
	for i := range bad.Messages {
		if bad.Messages[i].Seq == m.Seq {
			bad.Messages[i].DataSum[3] ^= 1
			m = bad.Messages[i]
		}
	}
	wantReadErr(t, "a recorded data sum flipped", readOne(&bad, m, data), m, busarchive.ErrChecksum, "its data's SHA-256 is")

	obj, _ := snapshotStream(t, nc, "OBJ_"+fxObjects)
	oix := checkIndex(t, "OBJ_"+fxObjects, obj)
	om := oix.Messages[0]
	if oc := chunkOf(oix, om); !oc.Raw {
		flipped = bytes.Clone(obj)
		flipped[oc.Off+20] ^= 1 // in the compressed block, past its header and CRC
		err := readOne(oix, om, flipped)
		var re *busarchive.IndexedReadError
		if !errors.As(err, &re) || re.Seq != om.Seq || !strings.Contains(re.Detail, "does not read") {
			t.Fatalf("a byte of a compressed chunk flipped: %v", err)
		}
		t.Logf("a byte of a compressed chunk flipped: %v", err)
	}
	checkFlippedIndex(t, ix)
}

// chunkOf is the chunk that holds m's entry's start.
func chunkOf(ix *busarchive.KeyIndex, m busarchive.IndexedMessage) busarchive.IndexChunk {
	var c busarchive.IndexChunk
	for _, ch := range ix.Chunks {
		if ch.Plain <= m.Off {
			c = ch
		}
	}
	return c
}

// readOne reads m alone through ix from data.
func readOne(ix *busarchive.KeyIndex, m busarchive.IndexedMessage, data []byte) error {
	reads := 0
	return busarchive.ReadIndexed(context.Background(), ix, []busarchive.IndexedMessage{m}, rangeOf(data, &reads), func(busarchive.ArchivedMessage) error { return nil })
}

func wantReadErr(t *testing.T, what string, err error, m busarchive.IndexedMessage, kind error, detail string) {
	t.Helper()
	var re *busarchive.IndexedReadError
	if !errors.As(err, &re) || re.Stream != "KV_big" || re.Seq != m.Seq || !errors.Is(err, kind) || !strings.Contains(re.Detail, detail) {
		t.Fatalf("%s: %v; want an IndexedReadError of KV_big, message %d, %v, saying %q", what, err, m.Seq, kind, detail)
	}
	t.Logf("%s: %v", what, err)
}

// checkFlippedIndex: a flipped byte anywhere in an encoded index is
// refused by its decoder.
func checkFlippedIndex(t *testing.T, ix *busarchive.KeyIndex) {
	t.Helper()
	enc, err := ix.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{3, len(enc) / 2, len(enc) - 1} {
		b := bytes.Clone(enc)
		b[at] ^= 0x10
		_, err := busarchive.DecodeKeyIndex(b)
		var ee *busarchive.EntryError
		if !errors.As(err, &ee) || !errors.Is(err, busarchive.ErrFormat) && !errors.Is(err, busarchive.ErrChecksum) {
			t.Fatalf("the index with byte %d flipped decodes: %v", at, err)
		}
		t.Logf("byte %d of the index flipped: %v", at, err)
	}
	b := bytes.Clone(enc)
	b[len(enc)/2] ^= 0x10
	if _, err := busarchive.DecodeKeyIndex(b); !errors.Is(err, busarchive.ErrChecksum) || !strings.Contains(err.Error(), "its SHA-256 is") {
		t.Fatalf("a flipped byte in the index: %v, want its SHA-256 refused", err)
	}
}
