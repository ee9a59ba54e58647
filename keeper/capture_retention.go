package keeper

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Retention of the capture: a base is never pruned while an incremental
// point is made of it or while the capture's window reaches into its
// chain; a chain whose window has passed, and of which no incremental
// point is made, loses its segments when a new base begins (its base is a
// point like any other then, for the policy to keep or remove).

// captureNeeds adds to protected, by point prefix, the bases that the
// points of module/local and its capture's window need, each with why.
func (k *Keeper) captureNeeds(ctx context.Context, module, local string, points []Point, protected map[string]string) error {
	bases, err := k.incrementalBases(ctx, module, local, points)
	if err != nil {
		return err
	}
	maps.Copy(protected, bases)
	rec, err := k.captureRecord(ctx, module, local)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	chains, err := k.listChains(ctx, module, local)
	if err != nil {
		return err
	}
	from := k.now().Add(-time.Duration(rec.Settings.Window))
	for i, c := range chains {
		if _, ok := protected[c.base]; ok {
			continue
		}
		if !chainEnd(chains, i, k.now()).Before(from) {
			protected[c.base] = fmt.Sprintf("the capture's window (%s back) restores from its chain", rec.Settings.Window)
		} else if len(c.listed) > 0 {
			protected[c.base] = "its capture chain's segments are not removed yet (the next base removes them)"
		}
	}
	return nil
}

// incrementalBases is, per base point of module/local that an
// incremental point or the aside of one is made of, why it is needed.
func (k *Keeper) incrementalBases(ctx context.Context, module, local string, points []Point) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range points {
		if p.Incremental && p.Base != "" {
			out[p.Base] = "the incremental point " + pointName(&p) + " is made of it and its capture's segments"
		}
	}
	err := k.listIndex(ctx, asideKey(module+"."+local+"."), func(data []byte) error {
		var a Aside
		if err := decodeRecord("a set-aside copy's record of "+module+"/"+local, data, &a); err != nil {
			return err
		}
		if a.Module == module && a.Local == local && a.Incremental && a.Base != "" {
			out[a.Base] = "the set-aside copy " + a.ID + " (an incremental point replaced) is made of it and its capture's segments"
		}
		return nil
	})
	return out, err
}

// captureNeed says why the capture of module/local needs the point at rel
// ("" when it does not).
func (k *Keeper) captureNeed(ctx context.Context, module, local, rel string) (string, error) {
	points, err := k.indexPoints(ctx, module, local)
	if err != nil {
		return "", err
	}
	protected := map[string]string{}
	if err := k.captureNeeds(ctx, module, local, points, protected); err != nil {
		return "", err
	}
	return protected[rel], nil
}

// chainEnd is the last moment chain i covers: the next chain's base, or now.
func chainEnd(chains []*chain, i int, now time.Time) time.Time {
	if i+1 < len(chains) {
		return chains[i+1].baseTaken
	}
	return now
}

// expireChains removes the segments of the chains of the capture whose
// window has passed and of which no incremental point is made, recording
// an act before each.
func (c *capturer) expireChains(ctx context.Context) error {
	k := c.k
	chains, err := k.listChains(ctx, c.rec.Module, c.rec.Local)
	if err != nil {
		return err
	}
	points, err := k.indexPoints(ctx, c.rec.Module, c.rec.Local)
	if err != nil {
		return err
	}
	bases, err := k.incrementalBases(ctx, c.rec.Module, c.rec.Local, points)
	if err != nil {
		return err
	}
	from := k.now().Add(-time.Duration(c.rec.Settings.Window))
	for i, ch := range chains {
		if _, needed := bases[ch.base]; needed || !chainEnd(chains, i, k.now()).Before(from) || ch.rel == c.chain.rel {
			continue
		}
		act := Act{Verb: VerbCapture, Module: c.rec.Module, Local: c.rec.Local, Caller: c.req.Caller, Why: "the capture's window passed",
			What:    fmt.Sprintf("remove the %d segment(s) of the capture chain %s (%s), which ended before the window of %s", len(ch.listed), ch.rel, HumanBytes(ch.listedBytes), c.rec.Settings.Window),
			Outcome: "intent"}
		if err := k.recordNow(ctx, act); err != nil {
			return fmt.Errorf("the act to remove the chain %s could not be recorded (%v), so it was not removed", ch.rel, err)
		}
		objs, err := k.store.List(ctx, ch.rel+"/")
		if err != nil {
			return err
		}
		// The records first, newest first: what is left is a shorter
		// chain, never one with a gap inside.
		for j := len(ch.listed) - 1; j >= 0; j-- {
			if err := k.store.Delete(ctx, ch.listed[j].key); err != nil {
				return err
			}
		}
		for _, o := range objs {
			if err := k.store.Delete(ctx, o.Key); err != nil {
				return err
			}
		}
		act.Outcome, act.What = "done", "removed"+act.What[len("remove"):]
		k.record(ctx, act)
	}
	return nil
}
