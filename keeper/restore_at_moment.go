package keeper

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// The moment of a restore planned from its chain (planMomentOf), and its
// point found or made (momentPoint), as restore-kept of an incremental
// point makes it.

// momentPoint finds or makes the point of the moment mo (with, when it
// made it, its verification as written), and says how old its positions
// sample is.
func (k *Keeper) momentPoint(ctx context.Context, r Request, mo momentAt) (*madePoint, time.Duration, string, error) {
	pm, err := k.planMomentOf(ctx, r, mo)
	if err != nil {
		return nil, 0, "", err
	}
	if p := k.indexedPoint(ctx, r.Module, r.Local, pm.ch.form, pm.fp); p != nil {
		return &madePoint{Point: p}, pm.plan.positionsAge, pm.said, nil
	}
	p, err := k.writeMoment(ctx, r, pm.ch, pm.base, pm.plan, pm.fp)
	if err != nil {
		return nil, 0, "", err
	}
	return p, pm.plan.positionsAge, pm.said, nil
}

// plannedMoment is a moment planned from its chain: the chain, its base
// point, the plan, the fingerprint of the moment's point and the sentence
// that says where it comes from.
type plannedMoment struct {
	mo   momentAt // as asked
	ch   *chain
	base *Point
	plan *momentPlan
	fp   string
	said string
	// composed: its restore composed the moment's archive and made no
	// point (restore_at_composed.go); composedSaid says so.
	composed bool
}

// composedSaid is what a restore that composed the moment pm's archive
// says of it, in place of pm.said.
func (pm *plannedMoment) composedSaid() string {
	return fmt.Sprintf("The archive of the moment %s was %s It was checked as it was composed, and composed again as it was restored, each stream held to what was checked; it was written nowhere and it is not kept: "+
		"a dry run of this restore makes the point of the moment, %s.", pm.mo.label, momentComposedSaid(pm.ch, pm.plan), pointRel(pm.base.Module, pm.base.Local, pm.ch.form, pm.fp))
}

// planMomentOf plans the moment mo of r's kept data from the chain that
// holds it, reading its base point's record and its segments' records.
// A moment in time reads the records of that chain only (and the newest
// of each other): a week's window holds some 600,000.
func (k *Keeper) planMomentOf(ctx context.Context, r Request, mo momentAt) (*plannedMoment, error) {
	chains, err := k.momentChains(ctx, r.Module, r.Local, mo)
	if err != nil {
		return nil, err
	}
	if len(chains) == 0 {
		return nil, Errorf(ErrNotFound, "%s/%s has no captured window (capture-kept turns capture on)", r.Module, r.Local)
	}
	from, to := chains[0].baseTaken, k.windowEnd(ctx, r.Module, r.Local, chains)
	window := fmt.Sprintf("the captured window is %s to %s", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	ch, err := pickChain(chains, mo, to)
	if err != nil {
		return nil, Errorf(ErrNotFound, "%v; %s", err, window)
	}
	if err := k.readChain(ctx, ch); err != nil {
		return nil, err
	}
	base, err := k.readBase(ctx, ch.base)
	if err != nil {
		return nil, fmt.Errorf("reading the base %s: %w", ch.base, err)
	}
	plan, err := k.planMoment(ctx, ch, base, mo, to)
	if err != nil {
		return nil, err
	}
	fp := momentFingerprintPrefix + stamp(plan.at)
	if mo.seq != nil {
		fp = momentFingerprintPrefix + "seq-" + seqDigest(mo.seq, ch.rel)
	}
	said := fmt.Sprintf("The point of the moment %s is %s, %s", mo.label, pointRel(r.Module, r.Local, ch.form, fp), momentMadeSaid(ch, plan))
	return &plannedMoment{mo: mo, ch: ch, base: base, plan: plan, fp: fp, said: said}, nil
}

// momentChains lists the chains of module/local for the moment mo: for a
// moment in time each with the records chainReach needs (its newest), for
// one by sequences with all of them (pickChain reads each chain's first).
func (k *Keeper) momentChains(ctx context.Context, module, local string, mo momentAt) ([]*chain, error) {
	if mo.seq != nil {
		return k.chains(ctx, module, local)
	}
	return k.chainsRead(ctx, module, local, k.readReach)
}

// untrackedSaid says which streams' deletes the capture had stopped
// recording by the moment (see maxTrackedDeletes), in order of name.
func untrackedSaid(pl *momentPlan) string {
	var names []string
	for name, ms := range pl.streams {
		if !ms.untrackedFrom.IsZero() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var said string
	for _, name := range names {
		said += fmt.Sprintf(" Stream %s held more deleted sequences than a capture tracks, so the deletes after %s are not recorded: the moment holds the messages deleted since then.",
			name, pl.streams[name].untrackedFrom.Format(time.RFC3339))
	}
	return said
}
