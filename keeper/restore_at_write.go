package keeper

import (
	"context"
	"fmt"
	"slices"
)

// writeMoment writes and commits the point of a moment, fingerprint fp, at
// the chain's form: each stream's archive made of the base's messages then
// the segments', as planned, the positions those of the sample. It is
// verified as it is written (restore_at_check.go), and committed only once
// that passed.
func (k *Keeper) writeMoment(ctx context.Context, r Request, ch *chain, base *Point, pl *momentPlan, fp string) (*madePoint, error) {
	pr := momentRequest(r, ch, base, fp)
	// Under the kept data's lease: two verbs that make the same moment at
	// once would each commit its archive under the other's record.
	ctx, release, err := k.lock(ctx, VerbRestore, pr)
	if err != nil {
		return nil, err
	}
	defer release()
	return k.writeMomentLocked(ctx, r, ch, base, pl, fp)
}

// writeMomentLocked is writeMoment once the kept data's lease is held.
func (k *Keeper) writeMomentLocked(ctx context.Context, r Request, ch *chain, base *Point, pl *momentPlan, fp string) (*madePoint, error) {
	pr := momentRequest(r, ch, base, fp)
	rel := pointRel(r.Module, r.Local, ch.form, fp)
	if p := k.indexedPoint(ctx, r.Module, r.Local, ch.form, fp); p != nil {
		return &madePoint{Point: p}, nil // made meanwhile
	}
	if err := k.checkRoom(ctx, momentBytes(base, pl), 0); err != nil {
		return nil, err
	}
	// No point is at rel (looked up under the lease just now): nothing
	// earlier is set aside.
	nothingEarlier := make(chan struct{})
	close(nothingEarlier)
	e := &earlier{done: nothingEarlier, cancel: func() {}}
	m, w, made, err := k.writeMomentArchive(ctx, k.store, k.seal != nil, r, base, nil, pl, rel, func(err error) error {
		return fmt.Errorf("writing the point of the moment: %w, so no point was written", err)
	})
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	var failed error
	fail := func(err error) (*Reply, error) { failed = err; return nil, err }
	rep, err := k.commitPoint(ctx, VerbRestore, pr, rel, m, w, nil, slices.Clone(pl.positions), e, fail, func(p *Point) string {
		return fmt.Sprintf("Made the point of a moment %s: %d stream(s), %d message(s).", k.abs(rel), len(p.Streams), totalMessages(p.Streams))
	}, func(p *Point) {
		at := pl.at
		p.At, p.Base = &at, base.Dir
	})
	if err != nil {
		return nil, err
	}
	if failed != nil {
		return nil, failed
	}
	made.Point = rep.Point
	return made, nil
}

// momentRequest is the request that makes the point of the moment fp of
// r's kept data, from the chain ch and its base.
func momentRequest(r Request, ch *chain, base *Point, fp string) Request {
	return Request{Module: r.Module, Local: r.Local, Form: ch.form, Fingerprint: fp, CatchUp: base.CatchUp, Caller: r.Caller, Why: "the moment of: " + r.Why}
}

// momentBytes is about what the point of the moment pl writes: its base's
// archive and the archives of the segments it reads (both s2, as the
// point's streams are).
func momentBytes(base *Point, pl *momentPlan) int64 {
	n := base.ArchiveSize
	for _, seg := range pl.segs {
		n += seg.ArchiveSize
	}
	return n
}
