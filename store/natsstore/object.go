package natsstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/nats-keeper/nats-keeper/store"
)

// part is one stored piece of an object: a part object of a head, or a
// plain object whole.
type part struct {
	name string
	size int64
	sum  [32]byte // SHA-256 of its bytes
}

// object reads one committed object part by part (store.Object).
type object struct {
	s      *Store
	info   store.Info
	parts  []part
	base   context.Context // ReadAt's, until Close
	cancel context.CancelFunc

	mu     sync.Mutex
	cached int // the part in buf, 1-based; 0 for none
	buf    []byte
	gets   atomic.Int64 // parts fetched, for the tests
}

func (o *object) Size() int64      { return o.info.Size }
func (o *object) Info() store.Info { return o.info }

func (o *object) Close() error {
	o.cancel()
	o.mu.Lock()
	o.buf, o.cached = nil, 0
	o.mu.Unlock()
	return nil
}

// locate is the index of the part holding byte off and that part's start.
func (o *object) locate(off int64) (int, int64) {
	if len(o.parts) == 1 {
		return 0, 0
	}
	i := int(off / store.PartSize)
	return i, int64(i) * store.PartSize
}

// ReadAt reads len(p) bytes at off. A part of at most PartSize is read
// whole, checked, and kept until a read needs another part; a larger plain
// object is streamed to the range instead.
func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("reading %s at %d: a negative offset", o.info.Key, off)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for n < len(p) && off < o.info.Size {
		i, start := o.locate(off)
		pt := o.parts[i]
		if pt.size > store.PartSize {
			r, err := o.reader(o.base, off, min(int64(len(p)-n), o.info.Size-off))
			if err != nil {
				return n, err
			}
			k, err := io.ReadFull(r, p[n:min(len(p), n+int(o.info.Size-off))])
			r.Close()
			n, off = n+k, off+int64(k)
			if err != nil {
				return n, err
			}
			continue
		}
		if o.cached != i+1 {
			if err := o.load(i); err != nil {
				return n, err
			}
		}
		k := copy(p[n:], o.buf[off-start:pt.size])
		n, off = n+k, off+int64(k)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// load reads part i whole into the cache and checks it.
func (o *object) load(i int) error {
	pt := o.parts[i]
	o.cached = 0
	if cap(o.buf) < int(pt.size) {
		o.buf = make([]byte, pt.size)
	}
	o.buf = o.buf[:pt.size]
	p, err := o.openPart(o.base, i)
	if err != nil {
		return err
	}
	defer p.Close()
	if _, err := io.ReadFull(p, o.buf); err != nil {
		return fmt.Errorf("reading %s: %w", o.info.Key, err)
	}
	o.cached = i + 1
	return nil
}

func (o *object) partErr(i int, what string, err error) error {
	msg := fmt.Sprintf("part %d of %d of %s (%s in bucket %s) %s", i+1, len(o.parts), o.info.Key, o.parts[i].name, o.s.bucket, what)
	if err != nil {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return errors.New(msg)
}

// Reader streams the n bytes at off.
func (o *object) Reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > o.info.Size {
		return nil, fmt.Errorf("reading %d bytes at %d of %s: the range is not inside its %d bytes", n, off, o.info.Key, o.info.Size)
	}
	o.dropCache()
	return o.reader(ctx, off, n)
}

// dropCache lets the part ReadAt kept go: a Reader means the small reads
// (an archive's headers, when it is opened) are over for now, and a restore
// keeps its archive open while it streams, sets aside and restores, so the
// part would take its 8 MiB all that time. A later ReadAt gets it again.
func (o *object) dropCache() {
	o.mu.Lock()
	o.buf, o.cached = nil, 0
	o.mu.Unlock()
}

func (o *object) reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	return &rangeReader{o: o, ctx: ctx, off: off, end: off + n}, nil
}

// rangeReader reads a range part by part. Each part's read begins at the
// part's start; the bytes before the range are read too, so a part read to
// its end is checked even when the range began inside it. While a part is
// read the next one the range needs is opened in the background, so the
// requests that begin a part (its meta, its consumer) are not waited for.
type rangeReader struct {
	o        *object
	ctx      context.Context
	off, end int64

	cur     *partStream
	ahead   *nextPart
	partEnd int64
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		r.Close()
		return 0, io.EOF
	}
	if r.cur == nil {
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	p = p[:min(int64(len(p)), r.end-r.off, r.partEnd-r.off)]
	n, err := io.ReadFull(r.cur, p)
	r.off += int64(n)
	if err != nil {
		return n, err
	}
	if r.off == r.partEnd { // read whole, so checked when its last chunk came
		r.closePart()
	}
	return n, nil
}

// next begins the read of the part holding r.off (opened ahead, or now),
// skips to r.off, and opens the part after it ahead when the range needs it.
func (r *rangeReader) next() error {
	i, start := r.o.locate(r.off)
	var cur *partStream
	var err error
	if a := r.ahead; a != nil && a.i == i {
		r.ahead = nil
		cur, err = a.wait()
	} else {
		if a != nil {
			r.ahead = nil
			a.drop()
		}
		cur, err = r.o.openPart(r.ctx, i)
	}
	if err != nil {
		return err
	}
	r.cur, r.partEnd = cur, start+r.o.parts[i].size
	if i+1 < len(r.o.parts) && r.partEnd < r.end {
		r.ahead = r.o.openAhead(r.ctx, i+1)
	}
	if _, err := io.CopyN(io.Discard, cur, r.off-start); err != nil {
		r.closePart()
		return err
	}
	return nil
}

func (r *rangeReader) closePart() {
	if r.cur != nil {
		r.cur.Close()
		r.cur = nil
	}
}

func (r *rangeReader) Close() error {
	r.closePart()
	if r.ahead != nil {
		r.ahead.drop()
		r.ahead = nil
	}
	return nil
}
