package filestore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"sync"
	"unsafe"

	"github.com/nats-keeper/nats-keeper/store"
)

// The file store's own Writer. Bytes go into the object's temporary file as
// they come, in aligned 1 MiB writes (O_DIRECT where the file system allows)
// made by a goroutine of the writer's own while the next megabyte fills; that
// goroutine also hashes the checksum's parts as it writes them. A held range
// costs no memory: the file can be rewritten in place, so WriteAt writes into
// the buffer still filling or (in order, by the same goroutine) into the
// file, and the parts a hold touched are hashed again, read back from the
// file, when the hold ends. So a writer holds bufCount buffers whatever the
// object's size and however long a hold lasts, and every byte is hashed once
// (the bytes of a held part twice).
const (
	bufSize  = 1 << 20
	bufCount = 3
)

// job is one step of the writing goroutine, taken in order: write buf at
// off (pooled: a buffer to hand back), defer the parts a hold touches, or
// hash the deferred parts again.
type job struct {
	buf      []byte
	off      int64
	pooled   bool
	hold     bool
	from, to int // parts (0-based) a hold touches
	release  bool
}

type writer struct {
	store.WriteGuard
	ctx context.Context
	k   *fileSink

	size   int64  // bytes written
	cur    []byte // the buffer filling; its first byte is at size-len(cur)
	jobs   chan job
	free   chan []byte
	done   chan struct{} // closed when the goroutine ended
	closed bool          // jobs is closed
	taken  int           // buffers taken from the store's pool, at most bufCount

	mu    sync.Mutex
	bgErr error // the goroutine's first failure

	// The goroutine's own, until done.
	sums     map[int][32]byte // finished parts
	deferred map[int]bool     // parts a hold touched: hashed again at release
	part     int              // the part h hashes
	h        hash.Hash
	written  int64  // bytes the goroutine wrote, in order (patches aside)
	scratch  []byte // for reading held parts back
}

// newWriter starts the writer of k. Its buffers come from the store's pool
// as they are needed (a small record takes one) and go back to it when the
// writer ends, so a keeper writing one small file after another allocates
// no megabytes for each.
func newWriter(ctx context.Context, key string, k *fileSink) *writer {
	w := &writer{WriteGuard: store.WriteGuard{Key: key}, ctx: ctx, k: k, jobs: make(chan job, bufCount+2), free: make(chan []byte, bufCount),
		done: make(chan struct{}), sums: map[int][32]byte{}, deferred: map[int]bool{}, h: sha256.New()}
	go w.run()
	return w
}

// alignedBuffer is an empty buffer of bufSize bytes whose address is aligned
// for O_DIRECT.
func alignedBuffer() []byte {
	b := make([]byte, bufSize+directAlign)
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	return b[skip : skip : skip+bufSize]
}

// buffer is an empty aligned buffer for w to fill: one the goroutine handed
// back, else one more from the pool while w has taken fewer than bufCount,
// else the next the goroutine hands back.
func (w *writer) buffer() []byte {
	select {
	case b := <-w.free:
		return b
	default:
	}
	if w.taken < bufCount {
		w.taken++
		return w.k.s.blocks.get()
	}
	return <-w.free
}

// giveBack returns every buffer w holds to the pool; the goroutine has ended.
func (w *writer) giveBack() {
	if w.cur != nil {
		w.k.s.blocks.put(w.cur)
		w.cur = nil
	}
	for {
		select {
		case b := <-w.free:
			w.k.s.blocks.put(b)
		default:
			return
		}
	}
}

// blockPool keeps a store's aligned write buffers between writers.
type blockPool struct{ p sync.Pool }

func (bp *blockPool) get() []byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return alignedBuffer()
}

func (bp *blockPool) put(b []byte) {
	if cap(b) == bufSize {
		b = b[:0]
		bp.p.Put(&b)
	}
}

func (w *writer) run() {
	defer close(w.done)
	for j := range w.jobs {
		if w.failed() == nil {
			var err error
			switch {
			case j.hold:
				for p := j.from; p <= j.to; p++ {
					w.deferred[p] = true
				}
			case j.release:
				err = w.rehash()
			case j.pooled:
				w.hash(j.buf)
				err = w.k.writeAt(j.buf, j.off)
				w.written += int64(len(j.buf))
			default: // a patch
				if _, err = w.k.f.WriteAt(j.buf, j.off); err != nil {
					err = fmt.Errorf("writing %s at %d: %w", w.k.f.Name(), j.off, err)
				}
			}
			if err != nil {
				w.mu.Lock()
				if w.bgErr == nil {
					w.bgErr = err
				}
				w.mu.Unlock()
			}
		}
		if j.pooled {
			w.free <- j.buf[:0]
		}
	}
}

func (w *writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bgErr
}

// hash adds p, the bytes at w.written, to the hashes of the parts it falls
// in, except the deferred ones.
func (w *writer) hash(p []byte) {
	off := w.written
	for len(p) > 0 {
		n := int(off / store.PartSize)
		if n != w.part {
			w.part = n
			w.h.Reset()
		}
		take := min(int64(len(p)), store.PartSize-off%store.PartSize)
		if !w.deferred[n] {
			w.h.Write(p[:take])
			if (off+take)%store.PartSize == 0 {
				w.sums[n] = [32]byte(w.h.Sum(nil))
			}
		}
		p, off = p[take:], off+take
	}
}

// rehash hashes every deferred part again from what the file holds: a
// finished part whole, the part being written up to w.written (h then goes on
// from there).
func (w *writer) rehash() error {
	for n := range w.deferred {
		delete(w.deferred, n)
		start := int64(n) * store.PartSize
		end := min(start+store.PartSize, w.written)
		if start >= w.written {
			continue
		}
		if w.scratch == nil {
			w.scratch = make([]byte, bufSize)
		}
		h := sha256.New()
		for off := start; off < end; {
			k, err := w.k.f.ReadAt(w.scratch[:min(int64(bufSize), end-off)], off)
			if err != nil {
				return fmt.Errorf("reading %s back at %d to hash a held part: %w", w.k.f.Name(), off, err)
			}
			h.Write(w.scratch[:k])
			off += int64(k)
		}
		dropCache(w.k.f, start, end-start)
		if end == start+store.PartSize {
			w.sums[n] = [32]byte(h.Sum(nil))
		} else {
			w.part, w.h = n, h
		}
	}
	return nil
}

func (w *writer) Write(p []byte) (int, error) {
	if err := w.Usable(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		if w.cur == nil {
			w.cur = w.buffer()
		}
		k := copy(w.cur[len(w.cur):cap(w.cur)], p)
		w.cur = w.cur[:len(w.cur)+k]
		p, n, w.size = p[k:], n+k, w.size+int64(k)
		if len(w.cur) == cap(w.cur) {
			if err := w.handOver(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// handOver gives the buffer filling to the goroutine and takes a free one.
func (w *writer) handOver() error {
	if err := w.ctx.Err(); err != nil {
		return w.Fail(fmt.Errorf("writing %s: %w, so the object was not committed", w.Key, err))
	}
	if err := w.failed(); err != nil {
		return w.Fail(fmt.Errorf("writing %s: %w, so the object was not committed", w.Key, err))
	}
	w.jobs <- job{buf: w.cur, off: w.size - int64(len(w.cur)), pooled: true}
	w.cur = nil // the next Write takes one
	return nil
}

func (w *writer) WriteAt(p []byte, off int64) (int, error) {
	if ok, err := w.StartWriteAt(len(p), off, w.size); !ok {
		return 0, err
	}
	end := off + int64(len(p))
	curOff := w.size - int64(len(w.cur))
	if end > curOff { // the part still in the buffer
		from := max(off, curOff)
		copy(w.cur[from-curOff:], p[from-off:])
	}
	if off < curOff { // the part handed over: written after it, in order
		w.jobs <- job{buf: append([]byte(nil), p[:min(int64(len(p)), curOff-off)]...), off: off}
	}
	return len(p), nil
}

func (w *writer) Hold(off, n int64) {
	if w.Usable() != nil {
		return
	}
	if w.CheckHold(off, n, 0, store.PartSize) != nil {
		return
	}
	if n > 0 {
		w.jobs <- job{hold: true, from: int(off / store.PartSize), to: int((off + n - 1) / store.PartSize)}
	}
}

func (w *writer) Release() {
	if !w.Holding {
		return
	}
	w.Holding = false
	if w.Usable() == nil {
		w.jobs <- job{release: true}
	}
}

func (w *writer) Commit(ctx context.Context) (store.Info, error) {
	if err := w.Usable(); err != nil {
		if !w.Committed {
			w.Abort()
		}
		return store.Info{}, err
	}
	w.Holding = false
	if len(w.cur) > 0 {
		w.jobs <- job{buf: w.cur, off: w.size - int64(len(w.cur)), pooled: true}
		w.cur = nil
	}
	w.jobs <- job{release: true}
	w.stop()
	for _, err := range []error{ctx.Err(), w.ctx.Err(), w.failed()} {
		if err != nil {
			w.Fail(fmt.Errorf("committing %s: %w, so the object was not committed", w.Key, err))
			w.Abort()
			return store.Info{}, w.Err
		}
	}
	count := int((w.size + store.PartSize - 1) / store.PartSize)
	if w.size%store.PartSize != 0 {
		w.sums[count-1] = [32]byte(w.h.Sum(nil))
	}
	sums := make([][32]byte, count)
	for n := range sums {
		s, ok := w.sums[n]
		if !ok {
			w.Fail(fmt.Errorf("committing %s: part %d of %d was never hashed (a bug in the file writer), so the object was not committed", w.Key, n+1, count))
			w.Abort()
			return store.Info{}, w.Err
		}
		sums[n] = s
	}
	sum := store.CombineSums(sums)
	info, err := w.k.Complete(ctx, w.size)
	if err != nil {
		w.Fail(fmt.Errorf("committing %s: %w, so the object was not committed", w.Key, err))
		w.Abort()
		return store.Info{}, w.Err
	}
	w.Committed = true
	info.Sum = sum
	return info, nil
}

// stop ends the goroutine once it did every job given.
func (w *writer) stop() {
	if !w.closed {
		w.closed = true
		close(w.jobs)
	}
	<-w.done
	w.giveBack()
}

func (w *writer) Abort() {
	if w.Committed || w.Aborted {
		return
	}
	w.Aborted = true
	w.stop()
	w.k.Abort(context.WithoutCancel(w.ctx))
}
