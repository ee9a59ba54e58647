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
	if err := waitAcks(ctx, sent, &waited, make([]uint64, 3)); !errors.Is(err, context.Canceled) || waited > 1 {
		t.Fatalf("a cancelled wait: %v, %d waited", err, waited)
	}
	b.err <- jetstream.ErrAsyncPublishTimeout
	c.ok <- &jetstream.PubAck{}
	done := make(chan error, 1)
	go func() { done <- waitAcks(context.Background(), sent, &waited, make([]uint64, 3)) }()
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrAsyncPublishTimeout) || waited != 3 {
			t.Fatalf("the resumed wait: %v, %d waited", err, waited)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the resumed wait waits for a future that already answered")
	}
}

// TestInOrder: a put whose chunks were stored in another order than they
// were published (a chunk published again after a 503, once later ones were
// stored) is refused with errOutOfOrder, which the store tries again.
func TestInOrder(t *testing.T) {
	if err := inOrder([]uint64{3, 4, 9}); err != nil {
		t.Fatalf("rising sequences: %v", err)
	}
	for _, seqs := range [][]uint64{{3, 5, 4}, {3, 3}} {
		err := inOrder(seqs)
		if !errors.Is(err, errOutOfOrder) {
			t.Fatalf("inOrder(%v) = %v, want errOutOfOrder", seqs, err)
		}
		s := &Store{}
		if !s.policy(time.Second).Passes(err) {
			t.Fatalf("the store does not try a put again after %v", err)
		}
	}
}
