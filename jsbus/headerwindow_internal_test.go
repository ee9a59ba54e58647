package jsbus

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestHeaderWindowAsksAgain: a header get whose answer never comes (here:
// never sent) is asked again with the adapter's retries, and one whose
// message was deleted meanwhile is skipped.
func TestHeaderWindowAsksAgain(t *testing.T) {
	_, nc, js := jstest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := New(ctx, nc, withTimeout(5*time.Second), WithAttemptTimeout(50*time.Millisecond), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	if err != nil {
		t.Fatal(err)
	}
	hdr := "NATS/1.0\r\nA: 1\r\n\r\n"
	for i := range 3 {
		m := nats.NewMsg("s.x")
		m.Header.Set("A", "1")
		m.Data = []byte{byte('a' + i)}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteMsg(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var got []keeper.Message
	w := headerWindow{a: a, ctx: ctx, stream: "S", fn: func(m keeper.Message) error { got = append(got, m); return nil }}
	defer w.close()
	if err := w.ask(99); err != nil { // makes the subscription; its answer is dropped as not asked
		t.Fatal(err)
	}
	for seq := range uint64(3) {
		w.queue = append(w.queue, windowed{m: keeper.Message{Seq: seq + 1, Subject: "s.x", Data: []byte{byte('a' + seq)}}, asked: true})
	}
	if err := w.drain(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 3 || string(got[0].Header) != hdr || string(got[1].Header) != hdr {
		t.Fatalf("got %+v", got)
	}
}
