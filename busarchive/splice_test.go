package busarchive_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
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
	err := busarchive.SpliceStreamArchive(&out, head, consumer, bytes.NewReader(raw.Bytes()), func(put func(busarchive.ArchivedMessage) error) error {
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
