package keeper

import (
	"context"
	"io"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/archives"
)

// countingWriter reports the bytes that pass through it.
type countingWriter struct {
	w    io.WriteCloser
	n    int64
	tick func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.tick(c.n)
	return n, err
}

func (c *countingWriter) Close() error { return c.w.Close() }

// releaseAfter is the archive size from which a snapshot or a restore gives
// its memory back to the system when it ends. Moving a large archive churns
// through the heap (nats.go allocates every snapshot chunk it receives); the
// Go runtime would return that memory only slowly, so the next large verb
// would start from a higher resident set. Returning it costs one collection.
const releaseAfter = 64 << 20

// verifyArchive fully verifies an opened archive and returns its manifest.
// Its error wraps ErrDamaged and lists every problem found.
func (k *Keeper) verifyArchive(ctx context.Context, a *openedArchive) (*busarchive.Manifest, *busarchive.Report, error) {
	return verifyOpened(ctx, a)
}

// The archive opener is package archives': these short names keep the
// engine's call sites.
type openedArchive = archives.Opened

var (
	verifyOpened     = archives.Verify
	problemSentences = archives.ProblemSentences
)

// openArchive opens the archive of the point or aside at rel in the
// keeper's store as archives.Open does, decrypting with the keeper's
// identity (serve --identity) where rec says it is encrypted.
func (k *Keeper) openArchive(ctx context.Context, rel string, rec *Point) (*openedArchive, error) {
	if rec != nil && rec.Incremental {
		mp, err := k.materialize(ctx, rec)
		if err != nil {
			return nil, err
		}
		rel, rec = mp.Dir, mp
	}
	return k.openStored(ctx, rel, rec)
}
