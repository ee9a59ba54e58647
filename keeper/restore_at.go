package keeper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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
// is verified, set aside first and restored by the usual path, and stays,
// so the same moment restores again without being made again; prune-kept
// removes it as any point.

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
	rep, err := k.RestoreKept(ctx, rr)
	if err != nil {
		return nil, fmt.Errorf("%s; %w", said, err)
	}
	ms := age.Milliseconds()
	rep.PositionsAgeMS = &ms
	rep.Said = fmt.Sprintf("%s %s The consumer positions were sampled %s before the moment.", said, rep.Said, age.Round(time.Millisecond))
	return rep, nil
}

// momentPoint finds or makes the point of the moment mo, and says how old
// its positions sample is.
func (k *Keeper) momentPoint(ctx context.Context, r Request, mo momentAt) (*Point, time.Duration, string, error) {
	chains, err := k.chains(ctx, r.Module, r.Local)
	if err != nil {
		return nil, 0, "", err
	}
	if len(chains) == 0 {
		return nil, 0, "", Errorf(ErrNotFound, "%s/%s has no captured window (capture-kept turns capture on)", r.Module, r.Local)
	}
	from, to := chains[0].baseTaken, k.windowEnd(ctx, r.Module, r.Local, chains)
	window := fmt.Sprintf("the captured window is %s to %s", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	ch, err := pickChain(chains, mo, to)
	if err != nil {
		return nil, 0, "", Errorf(ErrNotFound, "%v; %s", err, window)
	}
	base, err := k.readRecord(ctx, ch.base, false)
	if err != nil {
		return nil, 0, "", fmt.Errorf("reading the base %s: %w", ch.base, err)
	}
	plan, err := k.planMoment(ctx, ch, base, mo, to)
	if err != nil {
		return nil, 0, "", err
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
	if rec, err := k.index.Get(ctx, pointKey(r.Module, r.Local, ch.form, fp)); err == nil {
		var p Point
		if err := decodeRecord("point", rec, &p); err == nil {
			return &p, plan.positionsAge, said, nil
		}
	}
	p, err := k.writeMoment(ctx, r, ch, base, plan, fp)
	if err != nil {
		return nil, 0, "", err
	}
	return p, plan.positionsAge, said, nil
}

// pickChain is the chain a moment is made from: the newest whose base was
// taken at or before it (at), or whose base holds no stream past the
// sequences asked (at-seq).
func pickChain(chains []*chain, mo momentAt, end time.Time) (*chain, error) {
	if mo.seq == nil {
		if mo.at.Before(chains[0].baseTaken) || mo.at.After(end) {
			return nil, fmt.Errorf("the moment %s is outside the captured window", mo.at.Format(time.RFC3339Nano))
		}
		for i := len(chains) - 1; i >= 0; i-- {
			c := chains[i]
			if c.baseTaken.After(mo.at) || (mo.base != "" && c.base != mo.base) {
				continue
			}
			// An incremental point names its chain: the capture reached its
			// moment when it was taken.
			if mo.base == "" && i < len(chains)-1 && chainReach(c).Before(mo.at) {
				return nil, fmt.Errorf("the moment %s was not captured (no keeper captured between the end of one chain and the base of the next)", mo.at.Format(time.RFC3339Nano))
			}
			return c, nil
		}
	}
	for i := len(chains) - 1; i >= 0; i-- {
		if len(chains[i].segments) > 0 {
			if first := chains[i].segments[0]; seqsAfter(first, mo.seq) {
				return chains[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no chain holds the sequences asked")
}

// seqsAfter reports whether every stream at-seq names starts at or before
// its sequence in the chain whose first segment is s: the base holds the
// sequences below each stream's From.
func seqsAfter(s *segment, seqs map[string]uint64) bool {
	for name, n := range seqs {
		ss := s.stream(name)
		if ss == nil || n+1 < ss.From {
			return false
		}
	}
	return true
}

func seqDigest(seqs map[string]uint64, chain string) string {
	names := make([]string, 0, len(seqs))
	for s := range seqs {
		names = append(names, s)
	}
	slices.Sort(names)
	h := sha256.New()
	fmt.Fprintln(h, chain)
	for _, s := range names {
		fmt.Fprintf(h, "%s %d\n", s, seqs[s])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// windowEnd is the newest moment the capture reached: its mark when it
// is of the newest chain, else that chain's newest segment.
func (k *Keeper) windowEnd(ctx context.Context, module, local string, chains []*chain) time.Time {
	last := chains[len(chains)-1]
	end := chainReach(last)
	data, err := k.index.Get(ctx, captureMarkKey(module, local))
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			k.log.Warn("the capture's mark could not be read", "kept", module+"/"+local, "err", err)
		}
		return end
	}
	var mark captureMark
	if json.Unmarshal(data, &mark) == nil && mark.Chain == last.rel && mark.N == uint64(len(last.segments)) && mark.At.After(end) {
		return mark.At
	}
	return end
}

// chainReach is how far a chain's committed segments reach: the newest
// moment at which a segment not cut at its bytes read the streams' last
// sequences (every message stored before is in it or an earlier one), else
// its base's.
func chainReach(c *chain) time.Time {
	for i := len(c.segments) - 1; i >= 0; i-- {
		if !c.segments[i].Cut {
			return c.segments[i].Began
		}
	}
	return c.baseTaken
}
