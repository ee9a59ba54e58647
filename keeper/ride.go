package keeper

import (
	"context"
	"errors"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/store"
)

// busTries bounds how many times an archive of live streams is begun
// again after the bus went away part way (a server of the cluster died
// under the keeper's connection, which moved to another): the bus adapter
// rides out single requests, but a snapshot streamed over a connection
// that dropped cannot go on, only start again.
const busTries = 3

// snapshotArchive is writeArchive, begun again from the start (a new
// object, the old one aborted) when it failed because the bus went away,
// up to busTries times while ctx lasts.
func (k *Keeper) snapshotArchive(ctx context.Context, rel string, streams []string, p Progress) (*busarchive.Manifest, store.Writer, error) {
	for try := 1; ; try++ {
		m, w, err := k.writeArchive(ctx, rel, streams, k.bus.Snapshot, k.bus.ServerVersion(), k.parallel, p)
		if err == nil || try == busTries || !errors.Is(err, ErrNoBus) || ctx.Err() != nil {
			return m, w, err
		}
		k.log.Warn("the bus went away while an archive was written; writing it again from the start", "archive", rel, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
}
