package keeper

import (
	"context"
	"fmt"
	"io"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/store"
)

// The archive of a moment, written into the store as its point
// (writeMomentLocked) or composed into a scratch store (composeMoment).

// writeMomentArchive writes the archive of the moment pl, from base and
// its segments, at rel in st (encrypted when seal), checked as it is
// written: its manifest, its Writer (not committed) and the check
// (checkedAsWritten). A write or a check that failed leaves nothing; the
// write's failure is told by failed, the check's as checkedAsWritten
// tells it.
func (k *Keeper) writeMomentArchive(ctx context.Context, st store.Store, seal bool, r Request, base *Point, pl *momentPlan, rel string,
	failed func(error) error) (*busarchive.Manifest, store.Writer, *madePoint, error) {
	bases, err := k.openArchive(ctx, base.Dir, base)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("opening the base %s: %w", base.Dir, err)
	}
	defer bases.Close()
	checks := newMomentChecks(k.now())
	defer checks.stop()
	take := checks.source(func(ctx context.Context, stream string, data, meta io.Writer) error {
		return k.writeMomentStream(ctx, pl, pl.streams[stream], bases, data, meta)
	})
	names := make([]string, 0, len(base.Streams))
	for _, s := range base.Streams {
		names = append(names, s.Name)
	}
	m, w, err := k.writeArchiveInto(ctx, st, seal, rel, names, take, k.bus.ServerVersion(), 1, Progress{Verb: VerbRestore, Module: r.Module, Local: r.Local, Step: "moment"})
	if err != nil {
		return nil, nil, nil, failed(err)
	}
	made, err := k.checkedAsWritten(checks, rel, m)
	if err != nil {
		w.Abort()
		return nil, nil, nil, err
	}
	return m, w, made, nil
}
