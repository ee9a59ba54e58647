package jsbus_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// sent is a message as the test published it and the stream stored it.
type sent struct {
	seq     uint64
	subject string
	headers [][]byte // the header blocks the client may have written (one per order of its keys)
	data    []byte
}

// publishMix publishes n messages on orders.<i%7>, every third with one
// header of two values, every fifth with two headers, and returns them.
func publishMix(t *testing.T, js jetstream.JetStream, n int) []sent {
	t.Helper()
	ctx := testCtx(t)
	var out []sent
	for i := range n {
		m := nats.NewMsg(fmt.Sprintf("orders.%d", i%7))
		m.Data = fmt.Appendf(nil, "message %d", i)
		var blocks [][]byte
		switch {
		case i%5 == 0:
			m.Header = nats.Header{"Trace-Id": {fmt.Sprint(i)}, "Kind": {"five"}}
			blocks = [][]byte{
				fmt.Appendf(nil, "NATS/1.0\r\nTrace-Id: %d\r\nKind: five\r\n\r\n", i),
				fmt.Appendf(nil, "NATS/1.0\r\nKind: five\r\nTrace-Id: %d\r\n\r\n", i),
			}
		case i%3 == 0:
			m.Header = nats.Header{"Tag": {"a", fmt.Sprint(i)}}
			blocks = [][]byte{fmt.Appendf(nil, "NATS/1.0\r\nTag: a\r\nTag: %d\r\n\r\n", i)}
		}
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sent{seq: ack.Sequence, subject: m.Subject, headers: blocks, data: m.Data})
	}
	return out
}

func ordersStream(t *testing.T, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{Name: name, Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll is every message Messages gives.
func readAll(t *testing.T, b *bus, stream string, from, to uint64) []keeper.Message {
	t.Helper()
	var got []keeper.Message
	err := b.a.Messages(testCtx(t), stream, from, to, func(m keeper.Message) error {
		got = append(got, m)
		return nil
	})
	if err != nil {
		t.Fatalf("Messages(%s, %d, %d): %v", stream, from, to, err)
	}
	return got
}

// checkSame fails unless got is want, message by message: sequence,
// subject, header block, data, and the time the stream gives the sequence.
func checkSame(t *testing.T, s jetstream.Stream, got []keeper.Message, want []sent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d messages, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Seq != w.seq || g.Subject != w.subject || !bytes.Equal(g.Data, w.data) {
			t.Fatalf("message %d is #%d %s %q, want #%d %s %q", i, g.Seq, g.Subject, g.Data, w.seq, w.subject, w.data)
		}
		if len(w.headers) == 0 && g.Header != nil {
			t.Fatalf("message #%d has headers %q, none were published", g.Seq, g.Header)
		}
		if len(w.headers) > 0 && !slices.ContainsFunc(w.headers, func(h []byte) bool { return bytes.Equal(h, g.Header) }) {
			t.Fatalf("message #%d has the header block %q, want one of %q", g.Seq, g.Header, w.headers)
		}
	}
	// The times, against the stream's own get of a few of them.
	for _, i := range []int{0, len(want) / 2, len(want) - 1} {
		if len(want) == 0 {
			break
		}
		raw, err := s.GetMsg(testCtx(t), want[i].seq)
		if err != nil {
			t.Fatal(err)
		}
		if got[i].Time != raw.Time.UnixNano() {
			t.Fatalf("message #%d has time %d, the stream says %d", want[i].seq, got[i].Time, raw.Time.UnixNano())
		}
	}
}

func TestMessagesReadsEachMessageAsStored(t *testing.T) {
	b := newBus(t)
	s := ordersStream(t, b.js, "ORDERS")
	before := time.Now().UnixNano()
	want := publishMix(t, b.js, 3000)
	after := time.Now().UnixNano()
	got := readAll(t, b, "ORDERS", 0, 0)
	checkSame(t, s, got, want)
	for _, m := range got {
		if m.Time < before || m.Time > after {
			t.Fatalf("message #%d has time %d, outside the publishing's %d..%d", m.Seq, m.Time, before, after)
		}
	}
	// A range inside the stream.
	checkSame(t, s, readAll(t, b, "ORDERS", 100, 250), want[99:250])
	// A range past the end, and one before the first.
	if got := readAll(t, b, "ORDERS", 3001, 0); len(got) != 0 {
		t.Fatalf("a range past the end read %d messages", len(got))
	}
	// Deleted sequences are skipped.
	ctx := testCtx(t)
	del := []uint64{1, 2, 500, 1999, 2000, 2001, 3000}
	for _, seq := range del {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	var live []sent
	for _, w := range want {
		if !slices.Contains(del, w.seq) {
			live = append(live, w)
		}
	}
	checkSame(t, s, readAll(t, b, "ORDERS", 0, 0), live)
	checkSame(t, s, readAll(t, b, "ORDERS", 1999, 2001), nil)
	// fn's error stops the read and is returned.
	stop := errors.New("enough")
	n := 0
	err := b.a.Messages(ctx, "ORDERS", 0, 0, func(keeper.Message) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 10 {
		t.Fatalf("fn's error after %d messages gave %v", n, err)
	}
	if err := b.a.Messages(ctx, "NOPE", 0, 0, func(keeper.Message) error { return nil }); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("a missing stream gave %v", err)
	}
	// The reads left no consumer behind.
	if info, err := s.Info(ctx); err != nil || info.State.Consumers != 0 {
		t.Fatalf("after the reads the stream has %d consumers (%v)", info.State.Consumers, err)
	}
}

// TestMessagesStopsAtItsEndWhileAWriterAppends: the range's end holds
// while a writer keeps appending, whether the end's message is live or
// deleted, and a read to the last stops at the last the stream had when it
// began.
func TestMessagesStopsAtItsEndWhileAWriterAppends(t *testing.T) {
	b := newBus(t)
	s := ordersStream(t, b.js, "ORDERS")
	want := publishMix(t, b.js, 2000)
	ctx := testCtx(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.js.Publish(ctx, "orders.late", fmt.Appendf(nil, "late %d", i)); err != nil {
				t.Errorf("the writer: %v", err)
				return
			}
			written.Add(1)
		}
	})
	defer wg.Wait()
	defer close(stop)
	for written.Load() < 100 { // the writer is writing
		time.Sleep(time.Millisecond)
	}
	checkSame(t, s, readAll(t, b, "ORDERS", 1, 1500), want[:1500])
	if err := s.DeleteMsg(ctx, 1500); err != nil {
		t.Fatal(err)
	}
	checkSame(t, s, readAll(t, b, "ORDERS", 1000, 1500), want[999:1499])
	got := readAll(t, b, "ORDERS", 0, 0)
	if len(got) < 2100 {
		t.Fatalf("a read to the last read %d messages, the stream had more than 2,100", len(got))
	}
	for i, m := range got {
		wantSeq := uint64(i + 1)
		if i >= 1499 { // past the deleted #1500
			wantSeq++
		}
		if m.Seq != wantSeq {
			t.Fatalf("message %d of the read is #%d, want #%d", i, m.Seq, wantSeq)
		}
	}
	if n := written.Load(); n < int64(len(got)-1999) {
		t.Fatalf("the read gave %d messages, more than were written", len(got))
	}
}
