package keeper

import (
	"context"

	"github.com/nats-keeper/nats-keeper/kept"
)

// StreamDiff is what diffStreams says of one stream beyond its change.
type StreamDiff struct {
	Change                         kept.StreamChange
	Live                           bool
	TailFirst, TailLast, TailCount uint64
}

// DiffStreams is diffStreams of the point r names, as a restore calls it.
func DiffStreams(ctx context.Context, k *Keeper, r Request, limit int) ([]StreamDiff, error) {
	p, rel, err := k.locatePoint(ctx, r)
	if err != nil {
		return nil, err
	}
	a, err := k.openArchive(ctx, rel, p)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	ds, err := k.diffStreams(ctx, p, a, limit)
	if err != nil {
		return nil, err
	}
	out := make([]StreamDiff, len(ds))
	for i, d := range ds {
		out[i] = StreamDiff{Change: d.Change, Live: d.Live != nil,
			TailFirst: d.TailFirst, TailLast: d.TailLast, TailCount: d.TailCount}
	}
	return out, nil
}
