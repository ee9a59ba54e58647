package keeper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Which chain a moment is made from, and how far the capture reaches.

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
		if mo.base != "" && chains[i].base != mo.base {
			continue // a moment composed before names its chain (remakeMoment)
		}
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
// is of the newest chain, else that chain's newest segment. A mark that
// claims the segment after the newest committed one (written before that
// segment is) keeps the moment of the mark before it, which the committed
// segments reach: list-kept's window does not step back while a round
// writes.
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
	n := uint64(len(last.listed))
	if json.Unmarshal(data, &mark) == nil && mark.Chain == last.rel && (mark.N == n || mark.N == n+1) && mark.At.After(end) {
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
		if !c.segments[i].Reached.IsZero() {
			return c.segments[i].Reached
		}
		if !c.segments[i].Cut {
			return c.segments[i].Began
		}
	}
	return c.baseTaken
}

// readBase reads a chain's base point's record, positions and all.
func (k *storeView) readBase(ctx context.Context, rel string) (*Point, error) {
	var p Point
	if err := k.getJSON(ctx, recordKey(rel), &p); err != nil {
		return nil, err
	}
	return &p, nil
}
