package busarchive

import (
	"context"
	"fmt"
	"testing"
)

// A StreamCheck is held until every stream of its archive is written; once
// closed it holds neither its pipe's blocks nor its decoder (its state is
// a copy), so a check of many streams holds the memory of one at a time.
func TestStreamCheckLetsGoOnceClosed(t *testing.T) {
	c := NewStreamCheck(context.Background(), "A")
	w, err := NewStreamArchiveWriter(c, ArchiveHead{FirstSeq: 1, LastSeq: 2000, Msgs: 2000, Bytes: 2000 * 1024})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1024)
	for seq := uint64(1); seq <= 2000; seq++ {
		if err := w.Message(ArchivedMessage{Seq: seq, Time: int64(seq), Subject: fmt.Sprintf("A.%d", seq%7), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close() // safe twice
	if !c.dec.rep.Complete || c.dec.rep.Messages != 2000 {
		t.Fatalf("the check decoded %+v, want 2000 messages to the end", c.dec.rep)
	}
	p := c.pipe
	if len(p.free) != 0 || len(p.full) != 0 || p.fill != nil || p.held != nil || p.cur != nil {
		t.Fatalf("a closed check still holds blocks: %d free, %d full, fill %d, held %d", len(p.free), len(p.full), cap(p.fill), cap(p.held))
	}
	if c.dec.state == nil || c.dec.state.LastSeq != 2000 {
		t.Fatalf("the check's state %+v is not the archive's head", c.dec.state)
	}
}
