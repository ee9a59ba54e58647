package jsbus

import (
	"context"
	"fmt"
	"sync"
)

// DefaultInFlight is how many bytes every snapshot and restore on one
// adapter's connection together may have in flight at once (WithInFlight):
// half of nats-server's default max_pending (64 MiB), the bytes the server
// queues for one client before it drops it as a slow consumer. A snapshot
// lets the server send up to its window (8 MiB) before it acknowledges, so
// eight at once could queue 64 MiB for the keeper's one connection; the half
// left over is for everything else the connection carries (index, acts,
// consumer listings, replies). With it, four streams are snapshotted at once;
// a fifth waits for one of them to end before it asks the server.
const DefaultInFlight = 32 << 20

// MinInFlight is the smallest budget WithInFlight takes: one restore chunk
// at the default max payload.
const MinInFlight = 1 << 20

// WithInFlight bounds the bytes every snapshot and restore on the adapter's
// connection together may have in flight (default DefaultInFlight). Each
// takes its share before it asks the server and gives it back when it ends:
// a snapshot its window (8 MiB, or a quarter of the budget when that is
// smaller), a restore its chunks awaiting acknowledgement (4 chunks of up to
// the connection's max payload, or a quarter of the budget). One that does
// not fit waits, in the order they came, under its verb's context. Keep it
// at most half of the server's max_pending (64 MiB unless the server's
// configuration lowers it): the server drops a client it has queued more
// than that for, and every verb in flight on the connection fails.
func WithInFlight(n int64) Option { return func(o *options) { o.inFlight = n } }

// budget is a byte budget shared by every snapshot and restore on one
// connection: a weighted semaphore whose waiters are served in order.
type budget struct {
	mu      sync.Mutex
	total   int64
	used    int64
	waiting []*budgetWaiter // in arrival order
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once granted
}

func newBudget(total int64) *budget { return &budget{total: total} }

// take waits until n bytes (at most the whole budget) are free, or ctx
// ends, and returns the bytes taken, to be given back with give.
func (b *budget) take(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 1), b.total)
	b.mu.Lock()
	if len(b.waiting) == 0 && b.used+n <= b.total {
		b.used += n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiting = append(b.waiting, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: hand it back
			b.used -= n
			b.grant()
		default:
			for i, o := range b.waiting {
				if o == w {
					b.waiting = append(b.waiting[:i], b.waiting[i+1:]...)
					break
				}
			}
			b.grant() // a smaller waiter behind it may fit now
		}
		return 0, fmt.Errorf("waited for %d bytes of the connection's in-flight budget (%d in all, %d in use): %w",
			n, b.total, b.used, context.Cause(ctx))
	}
}

// give hands back n bytes taken with take.
func (b *budget) give(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grant()
}

// grant lets the waiters at the head in while they fit. b.mu is held.
func (b *budget) grant() {
	for len(b.waiting) > 0 && b.used+b.waiting[0].n <= b.total {
		w := b.waiting[0]
		b.waiting = b.waiting[1:]
		b.used += w.n
		close(w.ready)
	}
}

// share is what one snapshot or restore asks of the budget: want, but at
// most a quarter of the budget, so that four streams move at once however
// small the budget is.
func (b *budget) share(want int64) int64 { return max(1, min(want, b.total/4)) }

// inUse is the bytes taken now (tests, logs).
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
