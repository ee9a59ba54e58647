package sample

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
)

// TestDumpReadsSpansWhole: a dump read span by span in parallel gives every
// message once and in order, with gaps at the edges of spans and at the end
// of the stream, just as one read after another does.
func TestDumpReadsSpansWhole(t *testing.T) {
	ctx := context.Background()
	nc := natstest.Connect(t, natstest.Start(t, nil))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SPANS", Subjects: []string{"spans.>"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3*dumpSpan + 17
	for i := 1; i <= n; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("spans.%d", i%7), fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	gone := map[uint64]bool{dumpSpan: true, dumpSpan + 1: true, 2*dumpSpan - 1: true, 2 * dumpSpan: true, n - 1: true}
	for seq := range gone {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Dump(ctx, js, "SPANS")
	if err != nil {
		t.Fatal(err)
	}
	one, err := readSpan(ctx, js, "SPANS", 1, n)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(d.Streams[0].Messages); got != n-len(gone) || got != len(one) {
		t.Fatalf("the dump holds %d messages, one read after another %d, want %d", got, len(one), n-len(gone))
	}
	for i, m := range d.Streams[0].Messages {
		if m.Seq != one[i].Seq || m.Text != one[i].Text || gone[m.Seq] {
			t.Fatalf("message %d of the dump is %d %q, want %d %q", i, m.Seq, m.Text, one[i].Seq, one[i].Text)
		}
	}
}
