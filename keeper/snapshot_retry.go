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
// under the keeper's connection, which moved to another), or the server
// ended a snapshot because a consumer of the stream had no leader yet: the
// bus adapter rides out single requests, but a snapshot cut short cannot
// go on, only start again. The pauses grow by a second a try up to
// busPauseMax, about 15 s in all: a consumer's leader election after a
// server died took up to 10 s in e2e/cluster_test.go, and 3 tries 3 s
// apart sometimes missed its end.
const (
	busTries    = 6
	busPauseMax = 5 * time.Second
)

// snapshotArchive is writeArchive of the streams' snapshots, each cut at
// at (snapshot_cut.go; a zero at: not cut), which reads
// the consumers of each as it passes (pb.take) and builds the key index of
// each KV bucket and object store (ki.take), begun again from the start
// (a new object, the old one aborted) when it failed because the bus went
// away, up to busTries times while ctx lasts.
func (k *Keeper) snapshotArchive(ctx context.Context, rel string, streams []string, at time.Time, pb *positionsBefore, ki *keyIndexes, p Progress) (*busarchive.Manifest, store.Writer, error) {
	if at.IsZero() {
		return k.snapshotArchiveWith(ctx, rel, streams, ki.take(pb.take(k.bus.Snapshot)), p)
	}
	c := newCuts(at, k.log)
	return k.snapshotArchiveWith(ctx, rel, streams, ki.take(pb.take(c.take(k.bus.Snapshot))), p,
		func(w *busarchive.Writer) error { return c.record(w, ki) })
}

// snapshotArchiveWith is snapshotArchive with each stream taken by take.
// amend, when given, records in the manifest what the takes learnt, before
// it is committed.
func (k *Keeper) snapshotArchiveWith(ctx context.Context, rel string, streams []string, take streamSource, p Progress,
	amend ...func(*busarchive.Writer) error) (*busarchive.Manifest, store.Writer, error) {
	for try := 1; ; try++ {
		m, w, err := k.writeArchive(ctx, rel, streams, take, k.bus.ServerVersion(), k.parallel, p, amend...)
		if err == nil || try == busTries || !errors.Is(err, ErrNoBus) || ctx.Err() != nil {
			return m, w, err
		}
		k.log.Warn("the bus went away while an archive was written; writing it again from the start", "archive", rel, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(min(time.Duration(try)*time.Second, busPauseMax)):
		}
	}
}
