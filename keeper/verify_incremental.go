package keeper

import (
	"context"
	"fmt"
	"time"
)

// An incremental point has no archive of its own: it is its base point
// and the capture's segments up to its moment. verify-kept checks exactly
// those, each archive read whole against its manifest, and plans the
// moment from their records, without writing the moment's archive: a
// verb that only reads writes nothing to the store.

// verifyIncremental is VerifyKept of the incremental point p.
func (k *Keeper) verifyIncremental(ctx context.Context, p *Point) (*Reply, error) {
	refused := func(err error) (*Reply, error) {
		return nil, fmt.Errorf("restore point %s does not verify: %w; it must not be restored", pointName(p), err)
	}
	if p.At == nil || p.Base == "" {
		return refused(Errorf(ErrDamaged, "point.json says it is incremental but names no moment or base"))
	}
	r := Request{Module: p.Module, Local: p.Local, Caller: p.Caller}
	pm, err := k.planMomentOf(ctx, r, momentAt{at: *p.At, label: p.At.Format(time.RFC3339Nano), base: p.Base})
	if err != nil {
		return refused(fmt.Errorf("planning its moment from its base and segments: %w", err))
	}
	var bytes int64
	verify := func(rel string, rec *Point, what string) error {
		a, err := k.openArchive(ctx, rel, rec)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		defer a.Close()
		m, _, err := k.verifyArchive(ctx, a)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		bytes += m.Bytes()
		return nil
	}
	if err := verify(pm.ch.base, pm.base, "its base "+pm.ch.base); err != nil {
		return refused(err)
	}
	segs := 0
	for _, seg := range pm.plan.segs {
		if !seg.HasArchive {
			continue
		}
		rel := segmentRel(seg.Chain, seg.N)
		rec := &Point{Dir: rel, ArchiveSize: seg.ArchiveSize, ArchiveSum: seg.ArchiveSum, Sealing: seg.Sealing}
		if err := verify(rel, rec, fmt.Sprintf("its segment %d", seg.N)); err != nil {
			return refused(err)
		}
		segs++
	}
	vr := &VerifyReport{Point: k.abs(p.Dir), Streams: p.Streams, Bytes: bytes}
	said := fmt.Sprintf("Restore point %s verifies: it is incremental, and its base %s and the %d segment archive(s) up to its moment %s verify (%s read): "+
		"every entry's size and SHA-256 match and every stream archive is whole; its moment is planned from their records, and no archive of it was written.",
		pointName(p), pm.ch.base, segs, p.At.Format(time.RFC3339Nano), HumanBytes(bytes))
	return &Reply{Said: said, Point: p, Dir: k.abs(p.Dir), Report: vr}, nil
}
