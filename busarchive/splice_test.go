package busarchive_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// TestSpliceStreamArchive: a base of many s2 chunks (most passed through
// byte for byte, their memory read into again) spliced with a new head, a
// consumer and messages after the base's last sequence reads back as one
// archive: the new head, the consumer, every message of the base as it
// was, then the new ones, each once, in order.
func TestSpliceStreamArchive(t *testing.T) {
	base := synth{name: "A", msgs: 12_000, size: 1000, seed: 11} // about 12 MB of random bytes: many chunks
	var raw bytes.Buffer
	if err := base.writeData(&raw); err != nil {
		t.Fatal(err)
	}
	if n := dataChunks(raw.Bytes()); n < 4 {
		t.Fatalf("the base has %d s2 data chunks; the test needs more than the three SpliceStreamArchive holds", n)
	}
	var want [][32]byte // each message's subject, sequence and data, hashed
	sum := func(m busarchive.ArchivedMessage) [32]byte {
		return sha256.Sum256(fmt.Appendf(nil, "%d %s %d %x", m.Seq, m.Subject, m.Time, m.Data))
	}
	if _, err := busarchive.ReadStreamArchive(bytes.NewReader(raw.Bytes()), nil, func(m busarchive.ArchivedMessage) error {
		want = append(want, sum(m))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var more []busarchive.ArchivedMessage
	for seq := base.msgs + 3; seq < base.msgs+10; seq++ { // a gap after the base
		m := busarchive.ArchivedMessage{Seq: seq, Time: int64(seq) * 1000, Subject: "A.new", Data: fmt.Appendf(nil, "new %d", seq)}
		more = append(more, m)
		want = append(want, sum(m))
	}
	head := busarchive.ArchiveHead{FirstSeq: 1, LastSeq: base.msgs + 9, Msgs: uint64(len(want)), Bytes: 12345, Consumers: 1}
	consumer := []busarchive.NamedEntry{{Name: "c", Entry: []byte(`{"config":{"durable_name":"c","ack_policy":"explicit"},"state":{"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,"stream_seq":0}}}`)}}
	var out bytes.Buffer
	err := busarchive.SpliceStreamArchive(&out, head, consumer, bytes.NewReader(raw.Bytes()), int64(raw.Len()), func(put func(busarchive.ArchivedMessage) error) error {
		for _, m := range more {
			if err := put(m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got [][32]byte
	var consumers []string
	h, err := busarchive.ReadStreamArchive(bytes.NewReader(out.Bytes()), func(name string, _ []byte) error {
		consumers = append(consumers, name)
		return nil
	}, func(m busarchive.ArchivedMessage) error {
		got = append(got, sum(m))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.LastSeq != head.LastSeq || h.Msgs != head.Msgs || h.Consumers != 1 || len(consumers) != 1 || consumers[0] != "c" {
		t.Fatalf("the spliced archive's head %+v and consumers %v are not the ones written (%+v, [c])", h, consumers, head)
	}
	if len(got) != len(want) {
		t.Fatalf("the spliced archive holds %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("message %d of the spliced archive differs from what was spliced", i+1)
		}
	}
}

// dataChunks counts the data chunks (compressed or not) of an s2 stream.
func dataChunks(b []byte) int {
	n := 0
	for len(b) >= 4 {
		size := int(b[1]) | int(b[2])<<8 | int(b[3])<<16
		if b[0] == 0x00 || b[0] == 0x01 {
			n++
		}
		b = b[min(len(b), 4+size):]
	}
	return n
}

// TestSpliceHoldsChunksOnlyNearTheEnd: told the base's size, a splice
// passes each chunk on as it is read until it nears the end, and writes the
// very bytes it writes holding three throughout (size not known). A base
// with more than a splice allows after its last data chunk (here 4 MiB of
// padding) is refused, its sentinel passed through, rather than spliced
// wrong; not told its size, it is spliced.
func TestSpliceHoldsChunksOnlyNearTheEnd(t *testing.T) {
	base := synth{name: "A", msgs: 8_000, size: 1000, seed: 12}
	var raw bytes.Buffer
	if err := base.writeData(&raw); err != nil {
		t.Fatal(err)
	}
	head := busarchive.ArchiveHead{FirstSeq: 1, LastSeq: base.msgs + 1, Msgs: base.msgs + 1, Bytes: 1, Stamp: 1}
	splice := func(b []byte, size int64) ([]byte, error) {
		var out bytes.Buffer
		err := busarchive.SpliceStreamArchive(&out, head, nil, bytes.NewReader(b), size, func(put func(busarchive.ArchivedMessage) error) error {
			return put(busarchive.ArchivedMessage{Seq: base.msgs + 1, Time: 1, Subject: "A.new", Data: []byte("new")})
		})
		return out.Bytes(), err
	}
	held, err := splice(raw.Bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	passed, err := splice(raw.Bytes(), int64(raw.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(held, passed) {
		i := 0
		for i < len(held) && i < len(passed) && held[i] == passed[i] {
			i++
		}
		t.Fatalf("told the base's size, the splice wrote %d bytes that differ from the %d it writes holding chunks back, from byte %d", len(passed), len(held), i)
	}

	padded := append(bytes.Clone(raw.Bytes()), padding(4<<20)...)
	if _, err := splice(padded, 0); err != nil {
		t.Fatalf("a padded base not told its size: %v", err)
	}
	_, err = splice(padded, int64(len(padded)))
	if err == nil || !strings.Contains(err.Error(), "does not end with the end-of-backup sentinel in its last two data chunks") {
		t.Fatalf("a base with 4 MiB of padding after its last data chunk, told its size: %v; want it refused", err)
	}
}

// padding is n bytes of s2 padding chunks (type 0xfe), each under 16 MiB.
func padding(n int) []byte {
	var b []byte
	for n > 0 {
		k := min(n-4, 1<<20)
		b = append(b, 0xfe, byte(k), byte(k>>8), byte(k>>16))
		b = append(b, make([]byte, k)...)
		n -= 4 + k
	}
	return b
}
