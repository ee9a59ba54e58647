package jsbus_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestMessagesGoesOnWhenItsConsumerStalls pauses the consumer of a read
// mid-read, as a consumer stalls on a server that died: the consumer is
// there and beats its heartbeat but delivers nothing, so the client's own
// reset never comes. The read goes on with a new consumer from the
// sequence after the last it delivered, and gives every message once, in
// order (without it, the read fails after two minutes of waiting).
func TestMessagesGoesOnWhenItsConsumerStalls(t *testing.T) {
	b := newBus(t)
	s := ordersStream(t, b.js, "ORDERS")
	want := publishMix(t, b.js, 5000)
	ctx := testCtx(t)
	paused := ""
	var got []keeper.Message
	err := b.a.Messages(ctx, "ORDERS", 0, 0, func(m keeper.Message) error {
		got = append(got, m)
		if paused != "" {
			return nil
		}
		for name := range s.ConsumerNames(ctx).Name() {
			if !strings.HasPrefix(name, "nats_keeper_read_") {
				continue
			}
			body, _ := json.Marshal(map[string]any{"pause_until": time.Now().Add(time.Hour)})
			reply, err := b.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.PAUSE.ORDERS."+name, body)
			if err != nil || !strings.Contains(string(reply.Data), `"paused":true`) {
				t.Errorf("pausing the read's consumer %s: %v %s", name, err, reply.Data)
			}
			paused = name
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a read whose consumer was paused after message #%d: %v", got[0].Seq, err)
	}
	if paused == "" {
		t.Fatal("no consumer of the read was found to pause")
	}
	if len(got) == len(want) && got[len(got)-1].Seq == want[len(want)-1].seq && len(got) <= 1000 {
		t.Fatal("the read ended within the first pull, so the pause stalled nothing; publish more")
	}
	checkSame(t, s, got, want)
	for name := range s.ConsumerNames(ctx).Name() {
		if strings.HasPrefix(name, "nats_keeper_read_") {
			t.Errorf("consumer %s of the read is left on the stream after the read ended", name)
		}
	}
}
