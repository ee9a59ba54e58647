package keeper

import (
	"context"
	"fmt"
	"io"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/store"
)

// The archive of a moment, written into the store as its point
// (writeMomentLocked) or composed, written nowhere (composeMoment).

// writeMomentArchive writes the archive of the moment pl, from base and
// its segments, at rel in st (encrypted when seal), checked as it is
// written: its manifest, its Writer (not committed) and the check
// (checkedAsWritten). A write or a check that failed leaves nothing; the
// write's failure is told by failed, the check's as checkedAsWritten
// tells it.
//
// bases is the base's archive opened, when the caller holds it open (a
// composed moment reads it again); nil: it is opened here.
func (k *Keeper) writeMomentArchive(ctx context.Context, st store.Store, seal bool, r Request, base *Point, bases *openedArchive, pl *momentPlan, rel string,
	failed func(error) error) (*busarchive.Manifest, store.Writer, *madePoint, error) {
	if bases == nil {
		var err error
		if bases, err = k.openArchive(ctx, base.Dir, base); err != nil {
			return nil, nil, nil, fmt.Errorf("opening the base %s: %w", base.Dir, err)
		}
		defer bases.Close()
	}
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
