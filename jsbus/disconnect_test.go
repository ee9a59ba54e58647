package jsbus_test

import (
	"crypto/rand"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/jsbus"
)

// slowSink takes its time with each write and signals the first one.
type slowSink struct {
	once  sync.Once
	first chan struct{}
}

func (s *slowSink) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.first) })
	time.Sleep(20 * time.Millisecond)
	return len(p), nil
}
func (s *slowSink) Close() error { return nil }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// A snapshot whose connection drops is abandoned at once with a sentence
// that says so, not after the stall timeout.
func TestSnapshotAbandonedWhenConnectionDrops(t *testing.T) {
	b := newBus(t, jsbus.WithStallTimeout(10*time.Minute))
	ctx := testCtx(t)
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}}); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 64<<10)
	for i := 0; i < 400; i++ { // 25 MiB of data s2 cannot squash
		rand.Read(payload)
		if _, err := b.js.Publish(ctx, "big.x", payload); err != nil {
			t.Fatal(err)
		}
	}
	sink := &slowSink{first: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- b.a.Snapshot(ctx, "BIG", sink, nopCloser{io.Discard}) }()
	<-sink.first
	b.srv.Shutdown()
	start := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the snapshot did not end within a minute of the server going away")
	}
	if err == nil || !strings.Contains(err.Error(), "not whole") {
		t.Fatalf("got %v, want a snapshot that is not whole", err)
	}
	t.Logf("ended %s after the server went away: %v", time.Since(start), err)
	if !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("the error does not say the connection dropped: %v", err)
	}
}
