package natsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// future is a PubAckFuture that answers once, as jetstream's do.
type future struct {
	ok  chan *jetstream.PubAck
	err chan error
}

func newFuture() *future {
	return &future{ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
}
func (f *future) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *future) Err() <-chan error            { return f.err }
func (f *future) Msg() *nats.Msg               { return nil }

// TestWaitAcksResumes: a wait cut off by its context resumes where it
// stopped; a future that already answered is not waited for again.
func TestWaitAcksResumes(t *testing.T) {
	a, b, c := newFuture(), newFuture(), newFuture()
	sent := []jetstream.PubAckFuture{a, b, c}
	a.ok <- &jetstream.PubAck{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waited := 0
	// a's answer and the cancel are both ready: either may be taken.
	if err := waitAcks(ctx, sent, &waited); !errors.Is(err, context.Canceled) || waited > 1 {
		t.Fatalf("a cancelled wait: %v, %d waited", err, waited)
	}
	b.err <- jetstream.ErrAsyncPublishTimeout
	c.ok <- &jetstream.PubAck{}
	done := make(chan error, 1)
	go func() { done <- waitAcks(context.Background(), sent, &waited) }()
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrAsyncPublishTimeout) || waited != 3 {
			t.Fatalf("the resumed wait: %v, %d waited", err, waited)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the resumed wait waits for a future that already answered")
	}
}
