package keeper

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A restore to a moment (restore-kept with at or at-seq) makes the point of
// that moment from the capture, then restores it as any point: the newest
// base before the moment, plus its segments up to the moment, minus the
// deletes they recorded and what the streams' own limits had removed by
// then, written as one archive per stream (restore_at_compose.go) into a
// point of its own, points/<module>/<local>/f<form>-at-<moment>. That point
// is verified as it is written (restore_at_check.go), and the restore that
// made it does not read it whole again; the live data is set aside first
// and the point restored by the usual path. It stays, so the same moment
// restores again without being made again (verified then beside the
// set-aside, as any point); prune-kept removes it as any point.

// momentAt is the moment a restore asks for.
type momentAt struct {
	at    time.Time         // at: a time (zero with at-seq)
	seq   map[string]uint64 // at-seq: per stream the last sequence
	label string            // for sentences
	base  string            // the base point of the chain to make it from ("": the newest before the moment)
}

// restoreAt is RestoreKept of a moment.
func (k *Keeper) restoreAt(ctx context.Context, r Request) (*Reply, error) {
	mo := momentAt{label: r.At}
	if r.At != "" {
		at, err := kept.ParseAt(r.At)
		if err != nil {
			return nil, err
		}
		mo.at = at
	} else {
		mo.seq = r.AtSeq
		var parts []string
		for s, n := range r.AtSeq {
			parts = append(parts, fmt.Sprintf("%s:%d", s, n))
		}
		slices.Sort(parts)
		mo.label = "sequences " + strings.Join(parts, ", ")
	}
	p, age, said, err := k.momentPoint(ctx, r, mo)
	if err != nil {
		return nil, fmt.Errorf("%s of %s/%s at %s refused: %w, so nothing was done", VerbRestore, r.Module, r.Local, mo.label, err)
	}
	rr := r
	rr.At, rr.AtSeq, rr.Form, rr.Fingerprint = "", nil, p.Form, p.Fingerprint
	// A point this request wrote was verified as it was written: its
	// restore takes that verification and does not read it whole again.
	rep, err := k.restore(ctx, rr, p)
	if err != nil {
		return nil, fmt.Errorf("%s; %w", said, err)
	}
	ms := age.Milliseconds()
	rep.PositionsAgeMS = &ms
	rep.Said = fmt.Sprintf("%s %s The consumer positions were sampled %s before the moment.", said, rep.Said, age.Round(time.Millisecond))
	return rep, nil
}

// plannedMoment is a moment planned from its chain: the chain, its base
// point, the plan, the fingerprint of the moment's point and the sentence
// that says where it comes from.
type plannedMoment struct {
	ch   *chain
	base *Point
	plan *momentPlan
	fp   string
	said string
}

// planMomentOf plans the moment mo of r's kept data from the chain that
// holds it, reading its base point's record and its segments' records.
func (k *Keeper) planMomentOf(ctx context.Context, r Request, mo momentAt) (*plannedMoment, error) {
	chains, err := k.chains(ctx, r.Module, r.Local)
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
	said := fmt.Sprintf("The point of the moment %s is %s, made from the base %s and %d segment(s).",
		mo.label, pointRel(r.Module, r.Local, ch.form, fp), ch.base, len(plan.segs))
	if plan.unseen > 0 {
		said += fmt.Sprintf(" %d message(s) stored around the moment were deleted before the capture read them (a KV key or an object replaced faster than segment-every), so the moment may lack what they held.", plan.unseen)
	}
	return &plannedMoment{ch: ch, base: base, plan: plan, fp: fp, said: said}, nil
}

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
