package jsbus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// smallPayloadBus is a bus whose server takes at most 16 KiB per message, so
// a restore sends many small chunks and keeps several in flight.
func smallPayloadBus(t *testing.T) *bus {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	opts.MaxPayload = 16 << 10
	s, nc, js := jstest.Start(t, opts)
	a, err := jsbus.New(testCtx(t), nc, jsbus.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	return &bus{srv: s, nc: nc, js: js, a: a}
}

// fillRandom makes stream PIPE with msgs messages of size random bytes.
func fillRandom(ctx context.Context, t *testing.T, js jetstream.JetStream, msgs, size int) {
	t.Helper()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PIPE", Subjects: []string{"pipe.>"}}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range msgs {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if _, err := js.Publish(ctx, fmt.Sprintf("pipe.%d", i%37), b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPipelinedRestoreKeepsOrder restores a snapshot of about 2 MiB in 16 KiB
// chunks, several in flight at once, and reads back every message equal and
// in order.
func TestPipelinedRestoreKeepsOrder(t *testing.T) {
	ctx := testCtx(t)
	src := smallPayloadBus(t)
	fillRandom(ctx, t, src.js, 2000, 1<<10)
	before, err := sample.Dump(ctx, src.js, "PIPE")
	if err != nil {
		t.Fatal(err)
	}
	data, meta := snapshot(t, src.a, "PIPE")
	if len(data) < 100*(16<<10) {
		t.Fatalf("the snapshot is only %d bytes, too small to need many chunks", len(data))
	}
	dst := smallPayloadBus(t)
	if err := dst.a.Restore(ctx, "PIPE", bytes.NewReader(data), bytes.NewReader(meta)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	after, err := sample.Dump(ctx, dst.js, "PIPE")
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, after); d != "" {
		t.Fatalf("the restored stream differs from the snapshot:\n%s", d)
	}
}

// TestPipelinedRestoreRefused restores messages larger than the target
// server's max payload: the server refuses them part-way through the chunks,
// and the restore fails with an error instead of hanging or succeeding.
func TestPipelinedRestoreRefused(t *testing.T) {
	ctx := testCtx(t)
	src := newBus(t)
	fillRandom(ctx, t, src.js, 200, 20<<10)
	data, meta := snapshot(t, src.a, "PIPE")
	dst := smallPayloadBus(t)
	err := dst.a.Restore(ctx, "PIPE", bytes.NewReader(data), bytes.NewReader(meta))
	if err == nil {
		t.Fatal("messages over the server's max payload were restored without error")
	}
	if errors.Is(err, keeper.ErrConflict) || errors.Is(err, keeper.ErrBadRequest) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("restore of oversize messages: %v, want the server's refusal", err)
	}
	t.Logf("refused as expected: %v", err)
}
