package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// An incremental point (point.json: incremental, base, through, at) has no
// archive of its own: it is its base plus the capture's segments, and a
// keeper makes the point of its moment (f<form>-at-<moment>) from them when
// a verb reads it. The target has no capture chain, so copy carries it as a
// full point at its own place: the moment's point's archive and key
// indexes, under a record that is the moment point's (its archive's size
// and checksum, its streams and positions, its sealing) with the
// incremental point's names, taking, caller, why, catch-up, keep-until and
// moment, and no incremental, base or through. Before a keeper made its
// moment's point, the archive is composed from the base and segments into
// the target as it is written (a Composer, keeper.ComposeMoment), under
// the same record; without a Composer, or from an encrypted base (copy
// does not decrypt), it is refused.

// incrementalCopy is the copy of the incremental point rec at rel in from.
func incrementalCopy(ctx context.Context, from, to store.Store, rel string, rec *kept.Point, compose Composer) (*aCopy, error) {
	if layout.IsAsideRel(rel) {
		return nil, fmt.Errorf("it is the aside of an incremental point (its base and capture segments), which copy does not carry")
	}
	mrel, mrec, err := momentOf(ctx, from, rec, from.Describe().URL+"/"+rel)
	if errors.Is(err, kept.ErrNotFound) && compose != nil {
		return composedCopy(ctx, from, to, rel, rec, compose)
	}
	if err != nil {
		return nil, fmt.Errorf("%w, so it was not copied", err)
	}
	full := asFullPoint(rec, mrec, rel)
	raw, err := layout.RecordJSON(full)
	if err != nil {
		return nil, fmt.Errorf("its record as a full point does not encode: %w", err)
	}
	return &aCopy{from: from, to: to, src: mrel, rel: rel, raw: raw, rec: full}, nil
}

// asFullPoint is the record of the incremental point inc at rel as a full
// point whose archive is that of m, the point of its moment.
func asFullPoint(inc, m *kept.Point, rel string) *kept.Point {
	p := *m
	p.Module, p.Local, p.Form, p.Fingerprint, p.Dir = inc.Module, inc.Local, inc.Form, inc.Fingerprint, rel
	p.Taken, p.Caller, p.Why, p.CatchUp, p.KeepUntil, p.At = inc.Taken, inc.Caller, inc.Why, inc.CatchUp, inc.KeepUntil, inc.At
	p.Incremental, p.Base, p.Through = false, "", 0
	return &p
}

// composedCopy is the copy of the incremental point rec at rel whose
// moment's point is not made: its archive composed into the target.
func composedCopy(ctx context.Context, from, to store.Store, rel string, rec *kept.Point, compose Composer) (*aCopy, error) {
	_, base, err := layout.ReadRecord(ctx, from, rec.Base)
	if err != nil {
		return nil, fmt.Errorf("the record of its base %s does not read (%w), so it was not copied", rec.Base, err)
	}
	if base.Encrypted != nil {
		return nil, kept.Errorf(kept.ErrLocked, "it is an incremental point whose base and capture segments are encrypted, and copy does not decrypt "+
			"(it carries encrypted archives as they are stored), so it was not copied; a keeper with the identity makes the point of its moment "+
			"(a dry run of restore-kept of it), and copy then carries that")
	}
	return &aCopy{from: from, to: to, src: rel, rel: rel, rec: rec, compose: compose}, nil
}

// copyComposed composes the archive into the target, verifies it there
// whole, and commits its record (the incremental point as a full point),
// the evidence beside it first. It reports false when the target holds it
// already, and then reads no segment.
func (c *aCopy) copyComposed(ctx context.Context) (bool, error) {
	if there, err := c.composedThere(ctx); err != nil || there {
		return false, err
	}
	ca, err := c.compose(ctx, c.from, c.rec)
	if err != nil {
		return false, fmt.Errorf("its archive could not be composed from its base and segments: %w, so it was not copied", err)
	}
	defer ca.Close()
	full, err := ca.WritePoint(ctx, c.to, c.rel)
	if err != nil {
		return false, fmt.Errorf("its archive, composed from its base and segments, was not written: %w", err)
	}
	c.rec = full
	if c.raw, err = layout.RecordJSON(full); err != nil {
		return false, fmt.Errorf("its record as a full point does not encode: %w", err)
	}
	if err := c.verifyCopy(ctx, layout.ArchiveKeyOf(c.rel, c.rec)); err != nil {
		return false, err
	}
	if err := copyEvidence(ctx, c.from, c.to, c.rel); err != nil {
		return false, err
	}
	return true, c.commit(ctx, full.ArchiveSum)
}

// composedThere reports whether the target holds the incremental point
// as a full point already (composed or copied before: the same taking and
// moment, its archive of the size its record says), and then brings the
// evidence written beside it since.
func (c *aCopy) composedThere(ctx context.Context) (bool, error) {
	_, trec, err := layout.ReadRecord(ctx, c.to, c.rel)
	if err != nil || trec.Incremental || trec.At == nil || !trec.At.Equal(*c.rec.At) || !trec.Taken.Equal(c.rec.Taken) {
		return false, nil
	}
	dst, err := c.to.Stat(ctx, layout.ArchiveKeyOf(c.rel, trec))
	if err != nil || dst.Size != trec.ArchiveSize || (trec.ArchiveSum != "" && dst.Sum != "" && dst.Sum != trec.ArchiveSum) {
		return false, nil
	}
	return true, copyEvidence(ctx, c.from, c.to, c.rel)
}
