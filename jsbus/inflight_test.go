package jsbus

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The budget lets in what fits, makes the rest wait in the order they
// came, clamps a share to the whole, and lets a waiter whose context ends
// go without losing or leaking bytes.
func TestBudgetWaitsInOrderAndGivesBack(t *testing.T) {
	ctx := context.Background()
	b := newBudget(8)
	if got := b.share(100); got != 2 {
		t.Fatalf("share of 100 in a budget of 8 = %d, want a quarter, 2", got)
	}
	if n, err := b.take(ctx, 100); err != nil || n != 8 {
		t.Fatalf("take(100) of 8 = %d, %v; want the whole budget", n, err)
	}
	b.give(8)
	a, _ := b.take(ctx, 6)
	order := make(chan int, 2)
	go func() { n, _ := b.take(ctx, 4); order <- 1; b.give(n) }()
	waitWaiting(t, b, 1)
	go func() { n, _ := b.take(ctx, 1); order <- 2; b.give(n) }() // fits now, but waits behind the first
	waitWaiting(t, b, 2)
	select {
	case <-order:
		t.Fatal("a waiter got in while 6 of 8 were taken and the first wanted 4")
	case <-time.After(50 * time.Millisecond):
	}
	b.give(a) // both fit now, and both get in
	<-order
	<-order

	held, _ := b.take(ctx, 8)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := b.take(cctx, 3); errc <- err }()
	waitWaiting(t, b, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait returned %v, want context.Canceled", err)
	}
	b.give(held)
	if u := b.inUse(); u != 0 {
		t.Fatalf("%d bytes in use after everything was given back", u)
	}
	if n, err := b.take(ctx, 8); err != nil || n != 8 {
		t.Fatalf("the whole budget is not free after a cancelled wait: %d, %v", n, err)
	}
}

func waitWaiting(t *testing.T, b *budget, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b.mu.Lock()
		w := len(b.waiting)
		b.mu.Unlock()
		if w == n {
			return
		}
	}
	t.Fatalf("never saw %d waiter(s)", n)
}
