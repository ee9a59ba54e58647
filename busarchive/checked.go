package busarchive

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sync"
)

// CheckedStreamData reads streams/<stream>/stream.arc.s2 front to back, as
// StreamData does, and checks it while it is read: every byte is hashed, on
// a core of its own, and the entry's last block is handed out only once the
// entry's size and SHA-256 match the manifest. Otherwise Read returns the
// problems (errors.Join of *EntryError, as Verify) instead, and never the
// entry's end: a restore fed from the reader cannot complete with bytes that
// differ from those the point was taken with, and the bytes it is fed are the
// very bytes that were checked, read once.
//
// Unlike Verify, it does not decode the snapshot: the server decodes it as it
// restores and refuses one that does not decode whole, and the bytes are the
// point's own. (Decoding too took as much CPU as hashing, which a restore
// takes from the server; Verify still decodes.)
//
// When a Verify or a CheckedStreamData of the same Archive read the entry
// whole before and found it matching the manifest, the bytes are checked
// against the CRC-32C noted then instead of hashed with SHA-256 again (see
// reread.go): the point is verified whole before a restore over live data,
// and then read again to be sent; a moment's base is read once to compose
// the moment's archive and check it, and again to send it.
//
// backup.json is checked in full before it returns: its problems are
// returned here. Close the reader; Close stops the reading and waits for its
// goroutines, and can be called more than once.
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
	c := &checkedReader{ctx: ctx, sm: sm, a: a}
	if want, ok := a.verifiedCRC(stream); ok {
		c.crc, c.wantCRC = crc32.New(castagnoli), want
		c.h = c.crc
	} else {
		c.vh = newVerifyHash()
		c.h = c.vh
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.t = startHashTee(ctx, a.dataSource(ctx, loc), c.h, 1)
	c.side = c.t.sides[0]
	return c, nil
}

// dataSource reads an entry in blocks: from a file, straight from the disk
// where the file system allows (O_DIRECT), else through the page cache with
// readahead and drop-behind; from an archive that reads ranges, in one
// ranged read (which ends with ctx).
func (a *Archive) dataSource(ctx context.Context, loc location) blockSource {
	if src := openDirect(a.r, loc.off, loc.size); src != nil {
		return src
	}
	if rc, ok, err := entryReader(ctx, a.r, loc.off, loc.size); ok {
		if err != nil {
			return errSource{err}
		}
		return readerSource{rc}
	}
	return readerSource{newSeqReader(a.r, loc.off, loc.size)}
}

// checkedReader is CheckedStreamData's reader: the consumer of a hashTee
// beside its hasher, that holds one block back until it knows whether
// another follows.
type checkedReader struct {
	ctx    context.Context
	sm     *StreamManifest
	t      *hashTee
	side   *teeSide
	a      *Archive
	h      hash.Hash   // vh, or crc
	vh     *verifyHash // SHA-256 and CRC-32C: the CRC is noted on a once the SHA-256 matched
	crc    hash.Hash32 // set when a Verify of the archive read the entry before: checked against wantCRC
	cancel context.CancelFunc

	wantCRC uint32

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

// check waits for the hasher and returns io.EOF when the entry matched the
// manifest, else its problems.
func (c *checkedReader) check() error {
	<-c.t.hashed
	if c.t.err != nil {
		return fmt.Errorf("verification of %s stopped: %w", DataEntry(c.sm.Name), c.t.err)
	}
	var problems []error
	if c.crc != nil {
		problems = crcProblems(c.sm.Entries[0], c.t.n, c.crc, c.wantCRC)
	} else {
		problems = sumProblems(c.sm.Entries[0], c.t.n, c.h)
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	if c.vh != nil {
		c.a.noteVerified(c.sm.Name, c.vh.crc.Sum32())
	}
	return io.EOF
}

// Close stops reading and waits for the reader and the hasher to end. It can
// be called more than once.
func (c *checkedReader) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		if c.next != nil {
			c.t.release(c.next)
			c.next = nil
		}
		c.side.drain()
		<-c.t.hashed
	})
	return nil
}
