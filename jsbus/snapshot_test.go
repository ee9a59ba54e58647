package jsbus_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/jsbus"
)

// gate is a data writer that blocks its first write until opened.
type gate struct {
	open    chan struct{}
	once    sync.Once
	started chan struct{}
	n       int
}

func (g *gate) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.started) })
	<-g.open
	g.n += len(p)
	return len(p), nil
}

func (g *gate) Close() error { return nil }

// A snapshot whose writer stalls must not take in more than the server's
// flow-control window: chunks are acknowledged only once written, so the
// server stops sending, and the adapter's memory stays bounded however slow
// the disk. (jsm.go's SnapshotToBuffer acknowledges before writing and would
// take in the whole stream.)
func TestSnapshotHoldsNoMoreThanTheWindowWhileTheWriterStalls(t *testing.T) {
	ctx := testCtx(t)
	s := natstest.Start(t, nil)
	fill := natstest.Connect(t, s)
	js, err := jetstream.New(fill)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}}); err != nil {
		t.Fatal(err)
	}
	// 48 MiB of random (incompressible) payloads, six times the window.
	payload := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 768 {
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		if _, err := js.PublishAsync("big.x", append([]byte(nil), payload...), jetstream.WithStallWait(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing did not finish")
	}

	nc := natstest.Connect(t, s) // the adapter's own connection, so its counters are the snapshot's
	a, err := jsbus.New(ctx, nc, jsbus.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{open: make(chan struct{}), started: make(chan struct{})}
	var meta buf
	done := make(chan error, 1)
	before := nc.Stats().InBytes
	go func() { done <- a.Snapshot(context.Background(), "BIG", g, &meta) }()
	<-g.started
	time.Sleep(1500 * time.Millisecond) // the server would send everything by now if it could
	taken := nc.Stats().InBytes - before
	close(g.open)
	if err := <-done; err != nil {
		t.Fatalf("snapshot after the writer went on: %v", err)
	}
	const window, slack = 8 << 20, 1 << 20
	if taken > window+slack {
		t.Errorf("while the writer stalled the adapter took in %d bytes, more than the %d-byte window", taken, window)
	}
	if g.n < 48<<20 {
		t.Errorf("the snapshot wrote %d bytes, less than the 48 MiB stream", g.n)
	}
}
