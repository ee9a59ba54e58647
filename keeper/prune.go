package keeper

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Policy records in the index: policy.<module>.<local>, else policy.default.
const policyDefault = "policy.default"

func policyKey(module, local string) string { return "policy." + module + "." + local }

// SetPolicy records the retention policy of one kept data, or with module
// and local empty the default of every kept data without its own.
func (k *Keeper) SetPolicy(ctx context.Context, module, local string, p Policy) error {
	if err := p.Check(); err != nil {
		return err
	}
	if p.Empty() {
		return Errorf(ErrBadRequest, "the policy keeps nothing by any rule, so it was not recorded")
	}
	key, err := PolicyKey(module, local)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(p)
	if err := k.index.Put(ctx, key, data); err != nil {
		return fmt.Errorf("recording %s in the index: %w", key, withKind(ErrNoBus, err))
	}
	return nil
}

// PolicyOf is the policy recorded for module/local (its own, else the
// default), and the key it came from; nil when none is recorded.
func (k *Keeper) PolicyOf(ctx context.Context, module, local string) (*Policy, string, error) {
	for _, key := range []string{policyKey(module, local), policyDefault} {
		if module == "" && key != policyDefault {
			continue
		}
		data, err := k.index.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("reading %s from the index: %w", key, withKind(ErrNoBus, err))
		}
		var p Policy
		if err := json.Unmarshal(data, &p); err != nil || p.Check() != nil || p.Empty() {
			return nil, key, Errorf(ErrFailed, "the recorded policy %s is not readable (%v), so nothing was pruned by it", key, err)
		}
		return &p, key, nil
	}
	return nil, "", nil
}

// PolicyKey is the index key of the policy of module/local, or with both
// empty of the default, policy.default.
func PolicyKey(module, local string) (string, error) {
	switch {
	case module == "" && local == "":
		return policyDefault, nil
	case module == "" || local == "":
		return "", Errorf(ErrBadRequest, "a policy is recorded for a module and a kept data, or as the default for all; not for %q/%q", module, local)
	}
	for _, n := range [...]struct{ what, s string }{{"module", module}, {"local", local}} {
		if err := ValidName(n.what, n.s); err != nil {
			return "", err
		}
	}
	if err := checkKept(module, local); err != nil {
		return "", err
	}
	return policyKey(module, local), nil
}

// PruneKept applies a retention policy to the points of each kept data of
// the request (one, a module's, or all): the request's policy, else each
// kept data's recorded one. It never removes the newest point of a kept
// data, a point an unfinished restore names, a point whose keep-until has
// not come, or any aside. Each removal is recorded as an act before the
// point goes, and one that cannot be recorded does not happen; a point goes
// whole (its record first). DryRun gives the same list and removes nothing.
// A request that finds no policy at all is refused (400).
func (k *Keeper) PruneKept(ctx context.Context, r Request) (*Reply, error) {
	return k.prune(ctx, r, true)
}

// noPolicy is prune-kept's refusal when no policy applies to what it names.
type noPolicy struct{ said string }

func (e *noPolicy) Error() string { return e.said }
func (e *noPolicy) Unwrap() error { return ErrBadRequest }

// prune is PruneKept; hand says whether a person asked for it (the
// schedule of serve --prune-every does not).
func (k *Keeper) prune(ctx context.Context, r Request, hand bool) (*Reply, error) {
	if err := CheckRequest(VerbPrune, r); err != nil {
		return nil, err
	}
	kept, err := k.keptWithPoints(ctx, r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	var decisions []PruneDecision
	var said []string
	removed := 0
	found := r.Policy != nil
	for _, kd := range kept {
		p, from := r.Policy, "the request"
		if p == nil {
			var key string
			if p, key, err = k.PolicyOf(ctx, kd[0], kd[1]); err != nil {
				return nil, err
			}
			from = key
		}
		if p == nil {
			continue
		}
		found = true
		ds, n, err := k.pruneOne(ctx, r, kd[0], kd[1], *p, hand)
		decisions = append(decisions, ds...)
		removed += n
		if err != nil {
			if len(said) > 0 { // the kept data before it were pruned: say so
				err = fmt.Errorf("prune-kept stopped at %s/%s after %d point(s) were removed (%s): %w", kd[0], kd[1], removed, strings.Join(said, " "), err)
			}
			return &Reply{Said: err.Error(), Pruned: decisions}, err
		}
		said = append(said, fmt.Sprintf("%s/%s by %s (%s): %d point(s) kept, %d removed.", kd[0], kd[1], from, p, keptCount(ds), removedCount(ds)))
	}
	if !found && len(kept) == 0 {
		what := cmp.Or(strings.Trim(r.Module+"/"+r.Local, "/"), "any kept data")
		return nil, &noPolicy{fmt.Sprintf("prune-kept refused: no policy was given, and %s has no restore points for a recorded policy to apply to, so nothing was removed", what)}
	}
	if !found {
		return nil, &noPolicy{"prune-kept refused: no policy was given and none is recorded for what it names (policy.<module>.<local> or policy.default), so nothing was removed"}
	}
	head := fmt.Sprintf("Pruned: %d point(s) removed.", removed)
	if r.DryRun {
		head = "Dry run, nothing removed: the list says what a prune would keep and remove."
	}
	return &Reply{Said: strings.Join(append([]string{head}, said...), " "), Pruned: decisions}, nil
}

// keptWithPoints lists the kept data of module/local (either may be empty)
// that have points in the index, sorted.
func (k *Keeper) keptWithPoints(ctx context.Context, module, local string) ([][2]string, error) {
	prefix := "point."
	if module != "" {
		prefix += module + "."
		if local != "" {
			prefix += local + "."
		}
	}
	keys, err := k.index.Keys(ctx, prefix)
	if err != nil {
		return nil, Errorf(ErrFailed, "listing the index: %w", err)
	}
	seen := map[[2]string]bool{}
	var out [][2]string
	for _, key := range keys {
		parts := strings.SplitN(strings.TrimPrefix(key, "point."), ".", 3)
		if len(parts) < 3 {
			continue
		}
		kd := [2]string{parts[0], parts[1]}
		if !seen[kd] {
			seen[kd] = true
			out = append(out, kd)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+"/"+out[i][1] < out[j][0]+"/"+out[j][1] })
	return out, nil
}

// pruneOne prunes one kept data under its lease, so a prune never races a
// restore of it.
func (k *Keeper) pruneOne(ctx context.Context, r Request, module, local string, p Policy, hand bool) ([]PruneDecision, int, error) {
	lr := r
	lr.Module, lr.Local = module, local
	ctx, release, err := k.lock(ctx, VerbPrune, lr)
	if err != nil {
		return nil, 0, err
	}
	defer release()
	points, err := k.indexPoints(ctx, module, local)
	if err != nil {
		return nil, 0, err
	}
	protected := map[string]string{}
	if j, err := k.readJournal(ctx, module, local); err != nil {
		return nil, 0, fmt.Errorf("prune-kept of %s/%s: %w, so nothing was removed", module, local, err)
	} else if j != nil && j.Point != "" {
		protected[j.Point] = "journal: an unfinished restore restores it"
		if j.Moment != nil && j.Moment.Base != "" {
			protected[j.Moment.Base] = "journal: an unfinished restore composed its moment from it, and a keeper taking it up makes that moment's point from it"
		}
	}
	bases, err := k.tailBases(ctx, module, local)
	if err != nil {
		return nil, 0, fmt.Errorf("prune-kept of %s/%s: %w, so nothing was removed", module, local, err)
	}
	for base, id := range bases {
		protected[base] = "aside " + id + " holds a tail that follows it: putting that aside back needs it"
	}
	if err := k.captureNeeds(ctx, module, local, points, protected); err != nil {
		return nil, 0, fmt.Errorf("prune-kept of %s/%s: %w, so nothing was removed", module, local, err)
	}
	ds := Decide(points, p, k.now(), protected)
	if r.DryRun {
		return ds, 0, nil
	}
	removed := 0
	for _, d := range ds {
		if d.Keep {
			continue
		}
		act := Act{Verb: VerbPrune, Module: module, Local: local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why, Hand: hand,
			What: fmt.Sprintf("remove restore point %s (%s) by policy %s: %s", pointName(&d.Point), HumanBytes(d.Point.ArchiveSize), p, d), Outcome: "intent"}
		if err := k.recordNow(ctx, act); err != nil {
			return ds, removed, Errorf(ErrFailed, "prune-kept of %s/%s: the act to remove %s could not be recorded (%v), so it and the points after it were not removed; %d were",
				module, local, pointName(&d.Point), err, removed)
		}
		rel := pointRel(d.Point.Module, d.Point.Local, d.Point.Form, d.Point.Fingerprint)
		if err := k.removePrefix(ctx, rel); err != nil {
			return ds, removed, Errorf(ErrFailed, "prune-kept of %s/%s: removing %s failed (%v); its record went first, so it is no point any more, and what is left goes at a keeper's start",
				module, local, pointName(&d.Point), err)
		}
		if err := k.index.Delete(ctx, pointKey(d.Point.Module, d.Point.Local, d.Point.Form, d.Point.Fingerprint)); err != nil {
			k.log.Warn("a pruned point's index record could not be removed; a restart rebuilds the index", "point", pointName(&d.Point), "err", err)
		}
		act.Outcome, act.What = "done", "removed "+strings.TrimPrefix(act.What, "remove ")
		k.record(ctx, act)
		removed++
	}
	return ds, removed, nil
}

// indexPoints reads the points of one kept data from the index.
func (k *Keeper) indexPoints(ctx context.Context, module, local string) ([]Point, error) {
	var out []Point
	err := k.listIndex(ctx, "point."+module+"."+local+".", func(data []byte) error {
		var p Point
		if err := decodeRecord("a restore point record of "+module+"/"+local, data, &p); err != nil {
			return err
		}
		if p.Module == module && p.Local == local {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

func keptCount(ds []PruneDecision) int {
	n := 0
	for _, d := range ds {
		if d.Keep {
			n++
		}
	}
	return n
}

func removedCount(ds []PruneDecision) int { return len(ds) - keptCount(ds) }

// PruneRecorded applies the recorded policies to every kept data that has
// one (serve --prune-every); it does nothing, and returns nil, when none
// applies to a kept data with points (none is recorded, or only for kept
// data without points).
func (k *Keeper) PruneRecorded(ctx context.Context) (*Reply, error) {
	keys, err := k.index.Keys(ctx, "policy.")
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	rep, err := k.prune(ctx, Request{Caller: "nats-keeper serve --prune-every", Why: "the recorded retention policies, on schedule"}, false)
	var none *noPolicy
	if errors.As(err, &none) {
		return nil, nil
	}
	return rep, err
}
