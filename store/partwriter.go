package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"slices"
)

// NewPartWriter is the Writer of every backend that stores objects in parts:
// it buffers the bytes into PartSize parts and hands each one, with its
// SHA-256, to sink.Part; Commit hands over the rest and calls sink.Complete.
//
// Pipelining: while one part is in sink.Part (in a goroutine of the writer's
// own) the next one fills, and is hashed as it fills, up to leadBytes (2 MiB)
// of it; a write beyond that waits until the previous part was stored.
// (A part that WriteAt changed is hashed again in the background before it
// is stored.) The sink's methods are never called at the same time. Parts
// are stored with ctx; Complete with Commit's.
//
// Holding: a part that overlaps the range given to Hold stays in memory, so
// WriteAt can patch it, and is handed over once Release was called and the
// part is complete (or at Commit). A held range may span two parts (n at most
// PartSize); a longer one, or one that begins in a part already handed over,
// is refused. So a writer keeps at most three parts in memory (filling,
// storing, held), four while a hold spans two. A sink that is a PartReader
// has no part held: a part the hold overlaps is handed to its KeepPart when
// it fills, the writer keeps a copy of the held bytes alone, and Release (or
// Commit) reads each such part back, patches it and hands it to Part; so two
// parts in memory (filling, storing), whatever the hold.
//
// Memory is taken a block (BlockSize) at a time as a part fills, and the
// blocks of a part that was stored are taken back as soon as the part
// filling needs one (at most a part's worth kept for reuse): the writer
// holds the part being stored and at most leadBytes of the next, about one
// part, not two, whether the sink keeps up or not.
//
// Any failure (the sink's, a cancelled ctx, a WriteAt outside the held range,
// a refused Hold, a Write after Commit) makes the writer refuse everything
// after, and Commit returns it. A Commit that fails calls sink.Abort itself;
// Abort calls it once, and not after a Commit that succeeded.
func NewPartWriter(ctx context.Context, key string, sink PartSink) Writer {
	return newPartWriter(ctx, key, sink, PartSize)
}

// leadBytes is how far the next part fills, at most, while the part before
// it is being stored: the writer's caller waits after that (a snapshot's
// bytes wait in the server, within its window, not in the keeper). Enough
// for the stored part's successor to be well begun when the sink is done;
// a whole second part in memory bought no speed where the sink is the
// slower side (an object store, S3), only memory.
const leadBytes = 2 << 20

func newPartWriter(ctx context.Context, key string, sink PartSink, partSize int) *partWriter {
	w := &partWriter{WriteGuard: WriteGuard{Key: key}, ctx: ctx, sink: sink, partSize: partSize, curHash: sha256.New(),
		blockSize: min(BlockSize, partSize)}
	w.perPart = (partSize + w.blockSize - 1) / w.blockSize
	w.lead = max(1, leadBytes/w.blockSize)
	w.reader, _ = sink.(PartReader)
	return w
}

type partWriter struct {
	WriteGuard
	ctx      context.Context
	sink     PartSink
	partSize int

	blockSize int // bytes of a block (BlockSize, or partSize if smaller)
	perPart   int // blocks of a whole part
	lead      int // blocks of the part filling while another is stored (leadBytes)

	size      int64     // bytes written
	cur       Blocks    // the part being filled: size%partSize bytes, nil when none
	curLen    int       // its bytes
	curHash   hash.Hash // cur's bytes, hashed as they come
	curHashed bool      // curHash holds all of cur (no WriteAt changed it)
	sums      [][32]byte
	kept      int // parts handed to the sink and stored

	held []part // complete parts the hold keeps, in order

	reader   PartReader // the sink, when it reads parts back: then no part is held
	heldCopy []byte     // with reader: the held bytes as they stand (those written), from holdOff
	keptBack []int      // with reader: parts the hold overlaps, handed to KeepPart

	fly        *flight  // the part in sink.Part, or nil
	free       [][]byte // blocks to fill again: at most a part's
	live, peak int      // blocks in use or free, now and at most (the tests bound it)
}

// allocated is the most memory the writer held for parts at once, in parts.
func (w *partWriter) allocated() int { return (w.peak + w.perPart - 1) / w.perPart }

// part is a part ready for the sink. Its sum is hashed as it fills, in the
// writer's goroutine, while the part before it is being stored; a part that
// WriteAt changed is hashed again when it is stored.
type part struct {
	n      int
	data   Blocks
	sum    [32]byte
	hashed bool // sum is data's SHA-256
	keep   bool // for KeepPart: read back, patched and handed to Part at Release
}

type flight struct {
	part
	done chan error
}

func (w *partWriter) Write(p []byte) (int, error) {
	if err := w.Usable(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		if w.cur == nil {
			w.cur, w.curLen = Blocks{}, 0
			w.curHash.Reset()
			w.curHashed = true
		}
		if last := len(w.cur) - 1; last < 0 || len(w.cur[last]) == cap(w.cur[last]) {
			if w.fly != nil && len(w.cur) >= w.lead {
				if err := w.wait(); err != nil {
					return n, err
				}
			}
			w.cur = append(w.cur, w.block())
		}
		blk := &w.cur[len(w.cur)-1]
		room := min(cap(*blk)-len(*blk), w.partSize-w.curLen)
		k := copy((*blk)[len(*blk):len(*blk)+room], p)
		if w.heldCopy != nil {
			w.capture(p[:k], w.size)
		}
		if w.curHashed {
			w.curHash.Write(p[:k])
		}
		*blk = (*blk)[:len(*blk)+k]
		w.curLen += k
		p, n, w.size = p[k:], n+k, w.size+int64(k)
		if w.curLen == w.partSize {
			full := w.takeCur(int(w.size / int64(w.partSize)))
			if err := w.complete(full); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (w *partWriter) WriteAt(p []byte, off int64) (int, error) {
	if ok, err := w.StartWriteAt(len(p), off, w.size); !ok {
		return 0, err
	}
	end := off + int64(len(p))
	ps := int64(w.partSize)
	if w.reader != nil { // a part handed over is patched when it is read back
		copy(w.heldCopy[off-w.HoldOff:], p)
		for n := int(off/ps) + 1; n <= int((end-1)/ps)+1; n++ {
			start := int64(n-1) * ps
			if buf := w.patch(n); buf != nil {
				lo, hi := max(off, start), min(end, start+ps)
				buf.copyAt(p[lo-off:hi-off], lo-start)
			} else if !slices.Contains(w.keptBack, n) {
				return 0, w.Fail(fmt.Errorf("writing at %d into %s: part %d holding it was neither kept nor in memory (a bug in the part writer), so the object can no longer be committed", off, w.Key, n))
			}
		}
		return len(p), nil
	}
	for done := 0; done < len(p); {
		at := off + int64(done)
		buf := w.patch(int(at/ps) + 1)
		if buf == nil {
			return done, w.Fail(fmt.Errorf("writing at %d into %s: the part holding it is no longer in memory (a bug in the part writer), so the object can no longer be committed", at, w.Key))
		}
		done += buf.copyAt(p[done:], at%ps)
	}
	return len(p), nil
}

// patch is the buffer of part n, about to be changed, if the writer still
// has it.
func (w *partWriter) patch(n int) Blocks {
	if w.cur != nil && int64(n) == w.size/int64(w.partSize)+1 {
		w.curHashed = false
		return w.cur
	}
	for i := range w.held {
		if w.held[i].n == n {
			w.held[i].hashed = false
			return w.held[i].data
		}
	}
	return nil
}

// takeCur is the part being filled, number n, as a part for the sink.
func (w *partWriter) takeCur(n int) part {
	p := part{n: n, data: w.cur, hashed: w.curHashed}
	if p.hashed {
		w.curHash.Sum(p.sum[:0])
	}
	w.cur, w.curLen = nil, 0
	return p
}

func (w *partWriter) Hold(off, n int64) {
	if w.Usable() != nil {
		return
	}
	ps := int64(w.partSize)
	curStart := w.size - w.size%ps
	if w.CheckHold(off, n, curStart, ps) != nil {
		return
	}
	if w.reader != nil {
		w.heldCopy, w.keptBack = make([]byte, n), nil
		at := curStart
		for _, blk := range w.cur { // the bytes of the part filling from off
			w.capture(blk, at)
			at += int64(len(blk))
		}
	}
}

// capture copies what of b, the bytes at off, falls in the held range into
// heldCopy.
func (w *partWriter) capture(b []byte, off int64) {
	lo, hi := max(off, w.HoldOff), min(off+int64(len(b)), w.HoldEnd)
	if lo < hi {
		copy(w.heldCopy[lo-w.HoldOff:], b[lo-off:hi-off])
	}
}

// restore reads back each part handed to KeepPart while the hold lasted
// (with a PartReader), into a free buffer once the part in flight was
// stored, patches it and hands it to Part as any part.
func (w *partWriter) restore() error {
	kept, held, hoff := w.keptBack, w.heldCopy, w.HoldOff
	w.keptBack, w.heldCopy = nil, nil
	ps := int64(w.partSize)
	for _, n := range kept {
		if err := w.wait(); err != nil {
			return err
		}
		start := int64(n-1) * ps
		buf := w.blocks(int(min(ps, w.size-start)))
		if err := w.reader.ReadPart(w.ctx, n, buf); err != nil {
			w.release(buf)
			return w.Fail(fmt.Errorf("reading part %d of %s back to patch it: %w, so the object was not committed", n, w.Key, err))
		}
		lo, hi := max(start, hoff), min(start+int64(buf.Len()), hoff+int64(len(held)))
		buf.copyAt(held[lo-hoff:hi-hoff], lo-start)
		if err := w.ship(part{n: n, data: buf}); err != nil {
			return err
		}
	}
	return nil
}

func (w *partWriter) Release() {
	if !w.Holding {
		return
	}
	w.Holding = false
	if w.Usable() != nil {
		return
	}
	if w.reader != nil {
		w.restore()
		return
	}
	held := w.held
	w.held = nil
	for _, h := range held {
		if w.ship(h) != nil {
			return
		}
	}
}

func (w *partWriter) Commit(ctx context.Context) (Info, error) {
	if err := w.Usable(); err != nil {
		if !w.Committed {
			w.Abort()
		}
		return Info{}, err
	}
	if w.Holding && w.reader != nil {
		w.restore()
	}
	w.Holding = false
	held := w.held
	w.held = nil
	for _, h := range held {
		w.ship(h)
	}
	if w.cur != nil {
		w.ship(w.takeCur(int(w.size/int64(w.partSize)) + 1))
	}
	w.wait()
	if err := ctx.Err(); err != nil {
		w.Fail(fmt.Errorf("committing %s: %w, so the object was not committed", w.Key, err))
	}
	count := int((w.size + int64(w.partSize) - 1) / int64(w.partSize))
	if w.Err == nil && w.kept != count {
		w.Fail(fmt.Errorf("committing %s: %d of its %d parts were stored (a bug in the part writer), so the object was not committed", w.Key, w.kept, count))
	}
	if w.Err != nil {
		w.Abort()
		return Info{}, w.Err
	}
	sum := CombineSums(w.sums[:count])
	info, err := w.sink.Complete(ctx, count, w.size, sum)
	if err != nil {
		w.Fail(fmt.Errorf("committing %s: %w, so the object was not committed", w.Key, err))
		w.Abort()
		return Info{}, w.Err
	}
	w.Committed = true
	w.free = nil
	if info.Key == "" {
		info.Key = w.Key
	}
	info.Size, info.Sum = w.size, sum
	return info, nil
}

func (w *partWriter) Abort() {
	if w.Committed || w.Aborted {
		return
	}
	w.Aborted = true
	w.wait()
	w.sink.Abort(context.WithoutCancel(w.ctx))
	w.cur, w.held, w.free = nil, nil, nil
}

// complete takes a part just filled: kept if the hold overlaps it (or, when
// the sink reads parts back, handed to its KeepPart), stored otherwise.
func (w *partWriter) complete(p part) error {
	ps := int64(w.partSize)
	start := int64(p.n-1) * ps
	if w.Holding && w.HoldOff < start+ps && w.HoldEnd > start && w.HoldEnd > w.HoldOff {
		if w.reader != nil {
			p.keep = true
			w.keptBack = append(w.keptBack, p.n)
			return w.ship(p)
		}
		w.held = append(w.held, p)
		return nil
	}
	return w.ship(p)
}

// ship hands p to the sink in the background, once the part before it in
// flight was stored.
func (w *partWriter) ship(p part) error {
	if err := w.wait(); err != nil {
		return err
	}
	if err := w.ctx.Err(); err != nil {
		return w.Fail(fmt.Errorf("writing %s: %w, so the object was not committed", w.Key, err))
	}
	f := &flight{part: p, done: make(chan error, 1)}
	w.fly = f
	ctx, sink := w.ctx, w.sink
	go func() {
		if !f.hashed {
			f.sum = f.data.Sum()
		}
		if f.keep {
			f.done <- sink.(PartReader).KeepPart(ctx, f.n, f.data, f.sum)
			return
		}
		f.done <- sink.Part(ctx, f.n, f.data, f.sum)
	}()
	return nil
}

// wait waits for the part in flight and returns the writer's failure.
func (w *partWriter) wait() error {
	f := w.fly
	if f == nil {
		return w.Err
	}
	w.fly = nil
	return w.finish(f, <-f.done)
}

// reap takes the part in flight back if it was stored already, without
// waiting: its blocks are free for the part filling.
func (w *partWriter) reap() {
	if f := w.fly; f != nil {
		select {
		case err := <-f.done:
			w.fly = nil
			w.finish(f, err)
		default:
		}
	}
}

// finish records the end of f's storing, err.
func (w *partWriter) finish(f *flight, err error) error {
	if err != nil {
		return w.Fail(fmt.Errorf("storing part %d of %s: %w, so the object was not committed", f.n, w.Key, err))
	}
	if !f.keep { // a kept part counts when Part has it
		for len(w.sums) < f.n {
			w.sums = append(w.sums, [32]byte{})
		}
		w.sums[f.n-1] = f.sum
		w.kept++
	}
	if !w.Aborted {
		w.release(f.data)
	}
	return w.Err
}

// block is an empty block, reused where one is free.
func (w *partWriter) block() []byte {
	if len(w.free) == 0 {
		w.reap()
	}
	if k := len(w.free); k > 0 {
		b := w.free[k-1]
		w.free = w.free[:k-1]
		return b
	}
	w.live++
	w.peak = max(w.peak, w.live)
	return make([]byte, 0, w.blockSize)
}

// blocks is n bytes in blocks, for a part read back.
func (w *partWriter) blocks(n int) Blocks {
	var b Blocks
	for n > 0 {
		blk := w.block()
		k := min(n, cap(blk))
		b, n = append(b, blk[:k]), n-k
	}
	return b
}

// release takes back the blocks of a part that was stored: kept, up to a
// part's worth, for the parts to come; the rest are left to the collector.
// So the writer holds the part being stored and what of the next one has
// filled, not two whole parts, when the sink keeps up.
func (w *partWriter) release(b Blocks) {
	for _, blk := range b {
		if len(w.free) < w.perPart {
			w.free = append(w.free, blk[:0])
		} else {
			w.live--
		}
	}
}
