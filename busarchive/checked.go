package busarchive

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
)

// CheckedStreamData reads streams/<stream>/stream.arc.s2 front to back, as
// StreamData does, and verifies it while it is read, as Verify does: every
// byte is hashed on one core, and the snapshot is decoded to its end sentinel
// and compared with the manifest on another. The entry's last block is
// handed out only once all of that agrees with the manifest. Otherwise Read
// returns the problems (errors.Join of *EntryError, as Verify) instead, and
// never the entry's end: a restore fed from the reader cannot complete with
// bytes that were not verified, and the bytes it was fed are the very bytes
// that were verified, read once.
//
// backup.json is checked before it returns: its problems are returned here.
// Close the reader; Close stops the reading and waits for its goroutines.
func (a *Archive) CheckedStreamData(ctx context.Context, stream string) (io.ReadCloser, error) {
	sm := a.manifest.Stream(stream)
	if sm == nil {
		return nil, &EntryError{Entry: printable(DataEntry(stream)), Kind: ErrNoStream,
			Detail: fmt.Sprintf("the archive holds no stream %q", printable(stream))}
	}
	if _, problems := a.verifyMeta(ctx, sm); len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	loc := a.entries[DataEntry(stream)]
	c := &checkedReader{ctx: ctx, sm: sm, h: sha256.New(), decoded: make(chan struct{})}
	ctx, c.cancel = context.WithCancel(ctx)
	c.t = startHashTee(ctx, a.dataSource(loc), c.h, alignedBlock, 2)
	c.side = c.t.sides[0]
	dec := c.t.sides[1]
	go func() {
		defer close(c.decoded)
		var rep StreamReport
		c.decodeProblems = a.decode(ctx, sm, dec, dec.stopped, loc, &rep)
		dec.drain()
	}()
	return c, nil
}

// dataSource reads an entry in blocks: straight from the disk where the file
// system allows (O_DIRECT), else through the page cache with readahead and
// drop-behind.
func (a *Archive) dataSource(loc location) blockSource {
	if src := openDirect(a.r, loc.off, loc.size); src != nil {
		return src
	}
	return readerSource{newSeqReader(a.r, loc.off, loc.size)}
}

// checkedReader is CheckedStreamData's reader: one consumer of a hashTee,
// beside the hasher and the decoder, that holds one block back until it
// knows whether another follows.
type checkedReader struct {
	ctx    context.Context
	sm     *StreamManifest
	t      *hashTee
	side   *teeSide
	h      hash.Hash
	cancel context.CancelFunc

	decoded        chan struct{} // closed when the decoder is done
	decodeProblems []error       // set before decoded is closed

	next *teeBlock // the block after the one handed out, taken early
	cur  []byte
	err  error // returned once cur is empty: io.EOF or the problems

	closeOnce sync.Once
}

func (c *checkedReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		if c.side.held != nil {
			c.t.release(c.side.held)
			c.side.held = nil
		}
		if c.err != nil {
			return 0, c.err
		}
		if err := c.ctx.Err(); err != nil {
			c.err = fmt.Errorf("reading %s stopped: %w", DataEntry(c.sm.Name), err)
			continue
		}
		b := c.next
		c.next = nil
		if b == nil {
			var ok bool
			if b, ok = <-c.side.ch; !ok {
				c.err = c.check() // an empty entry, or one whose reading stopped
				continue
			}
		}
		// Hand b out once the block after it has been read; if there is
		// none, b holds the entry's end: only once everything is checked.
		nb, ok := <-c.side.ch
		if ok {
			c.next = nb
		} else if c.err = c.check(); c.err != io.EOF {
			c.t.release(b)
			continue
		}
		c.side.held, c.cur = b, b.data
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// check waits for the hasher and the decoder and returns io.EOF when the
// entry verified, else its problems.
func (c *checkedReader) check() error {
	<-c.t.hashed
	<-c.decoded
	name := DataEntry(c.sm.Name)
	if c.t.err != nil {
		return errors.Join(append([]error{fmt.Errorf("verification of %s stopped: %w", name, c.t.err)}, c.decodeProblems...)...)
	}
	problems := append(sumProblems(c.sm.Entries[0], c.t.n, c.h), c.decodeProblems...)
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	return io.EOF
}

// Close stops reading and waits for the reader, hasher and decoder to end.
// It can be called more than once.
func (c *checkedReader) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		if c.next != nil {
			c.t.release(c.next)
			c.next = nil
		}
		c.side.drain()
		<-c.t.hashed
		<-c.decoded
	})
	return nil
}
