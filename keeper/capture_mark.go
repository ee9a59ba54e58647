package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// captureMark is capture-mark.<module>.<local> in the index: how far the
// capture of the chain has seen (At), with N segments committed, or
// segment N claimed and not yet committed.
type captureMark struct {
	Chain string    `json:"chain"`
	N     uint64    `json:"n"`
	At    time.Time `json:"at"`
}

// errCaptureLost: another keeper wrote the capture's mark since this one
// did: it captures the kept data now.
var errCaptureLost = errors.New("another keeper wrote the capture's mark: it captures this kept data now")

// mark records in the index that the chain has n segments (or claims the
// n-th) and that the capture saw its streams at at: the window reaches to
// at even when no segment was written since. It writes over the mark this
// capture read or wrote last, and only that one.
func (c *capturer) mark(ctx context.Context, n uint64, at time.Time) error {
	data, err := json.Marshal(captureMark{Chain: c.chain.rel, N: n, At: at})
	if err != nil {
		return err
	}
	key := captureMarkKey(c.rec.Module, c.rec.Local)
	var rev uint64
	if c.markRev == 0 {
		rev, err = c.k.index.Create(ctx, key, data)
	} else {
		rev, err = c.k.index.Update(ctx, key, data, c.markRev)
	}
	if errors.Is(err, ErrExists) || errors.Is(err, ErrRevision) {
		return errCaptureLost
	}
	if err != nil {
		return fmt.Errorf("writing the capture's mark: %w", err)
	}
	c.markRev, c.marked = rev, at
	c.k.observe.Captured(c.rec.Module, c.rec.Local, 0, at)
	return nil
}

func captureMarkKey(module, local string) string { return "capture-mark." + module + "." + local }

// readMeta reads a backup.json whole, within its bound.
func readMeta(r io.ReadCloser) ([]byte, error) {
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, busarchive.MaxMetaSize))
}
