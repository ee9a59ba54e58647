package busarchive

import (
	"io"
	"sync"
)

// indexQueueSize is the bytes an Indexer holds between the snapshot and its
// decoder: the snapshot waits for the decoder only beyond it.
const indexQueueSize = 8 << 20

// indexQueue is a bounded ring of bytes between a writer (the snapshot) and
// one reader in another goroutine (the Indexer's decoder). It allocates its
// ring once. Once the reader stopped, writes are dropped and never wait.
type indexQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	ring    []byte
	start   int // where the queued bytes begin in ring
	n       int // bytes queued
	closed  bool
	stopped bool
}

func newIndexQueue(size int) *indexQueue {
	q := &indexQueue{ring: make([]byte, size)}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// put queues a copy of p, waiting while the ring is full.
func (q *indexQueue) put(p []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(p) > 0 && !q.stopped && !q.closed {
		for q.n == len(q.ring) && !q.stopped {
			q.cond.Wait()
		}
		if q.stopped {
			return
		}
		end := (q.start + q.n) % len(q.ring)
		k := copy(q.ring[end:min(len(q.ring), end+len(q.ring)-q.n)], p)
		q.n += k
		p = p[k:]
		q.cond.Broadcast()
	}
}

func (q *indexQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.n == 0 {
		return 0, io.EOF
	}
	k := copy(p, q.ring[q.start:min(len(q.ring), q.start+q.n)])
	q.start = (q.start + k) % len(q.ring)
	q.n -= k
	q.cond.Broadcast()
	return k, nil
}

// close says no more is written: the reader reads what is queued, then
// io.EOF.
func (q *indexQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// stop says the reader is done: what is queued is dropped and nothing more
// is queued.
func (q *indexQueue) stop() {
	q.mu.Lock()
	q.stopped, q.n = true, 0
	q.cond.Broadcast()
	q.mu.Unlock()
}
