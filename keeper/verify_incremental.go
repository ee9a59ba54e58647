package keeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// verifyIncremental is verify-kept of an incremental point: the archive of
// its moment composed from its base and the capture's segments, as a
// restore of it would make it, and checked as a written one is (each
// stream decoded whole and held to its backup.json), written nowhere. The
// base and every segment the moment reads are read whole and checked
// against their manifests on the way. Nothing is written to the store, so
// a verification of every point (a schedule, say) costs the store nothing.
func (k *Keeper) verifyIncremental(ctx context.Context, r Request, p *Point, rel string) (*Reply, error) {
	bad := func(err error) (*Reply, error) {
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("restore point %s, incremental, was not verified: %w", pointName(p), err)
		}
		return nil, fmt.Errorf("restore point %s does not verify: %w; it must not be restored", pointName(p), err)
	}
	if p.At == nil || p.Base == "" {
		return bad(Errorf(ErrDamaged, "the incremental point names no moment or base"))
	}
	mr := Request{Module: p.Module, Local: p.Local, Caller: r.Caller, Why: "verify-kept of " + pointName(p)}
	pm, err := k.planMomentOf(ctx, mr, momentAt{at: *p.At, label: p.At.Format(time.RFC3339Nano), base: p.Base})
	if err != nil {
		return bad(err)
	}
	bases, err := k.openStored(ctx, pm.base.Dir, pm.base)
	if err != nil {
		return bad(fmt.Errorf("opening the base %s: %w", pm.base.Dir, err))
	}
	defer bases.Close()
	cm := &ComposedMoment{v: &k.storeView, point: p, plan: pm.plan, bases: bases}
	vr := &VerifyReport{Point: k.abs(rel)}
	for _, s := range pm.base.Streams {
		c, err := busarchive.CheckComposed(ctx, s.Name, io.Discard, cm.Compose)
		if len(busarchive.Problems(err)) > 0 {
			err = &DamagedError{Path: k.abs(rel) + " (its moment, composed)", Problems: problemSentences(err)}
		}
		if err != nil {
			return bad(fmt.Errorf("stream %s: %w", s.Name, err))
		}
		st := c.Manifest.State
		vr.Streams = append(vr.Streams, StreamSum{Name: s.Name, Messages: c.Report.Messages, Bytes: st.Bytes,
			FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Consumers: st.Consumers})
		vr.Bytes += c.Size
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Restore point %s verifies: it is incremental, and the archive of its moment was composed from the base %s and %d segment(s), "+
		"each read whole and checked against its manifest, and checked as a written archive is (every stream decoded whole and held to its backup.json), "+
		"without writing it: %d stream(s), %s", pointName(p), pm.ch.base, len(pm.plan.segs), len(vr.Streams), HumanBytes(vr.Bytes))
	for _, s := range vr.Streams {
		fmt.Fprintf(&b, "; %s: %d message(s), sequences %d..%d, %d consumer(s)", s.Name, s.Messages, s.FirstSeq, s.LastSeq, s.Consumers)
	}
	b.WriteString(".")
	b.WriteString(untrackedSaid(pm.plan))
	if made := k.indexedPoint(ctx, p.Module, p.Local, pm.ch.form, pm.fp); made != nil {
		fmt.Fprintf(&b, " The point of its moment, %s, which a restore of it restores, is made; verify-kept of that point checks its archive.", k.abs(made.Dir))
	}
	return &Reply{Said: b.String(), Point: p, Dir: k.abs(rel), Report: vr}, nil
}
