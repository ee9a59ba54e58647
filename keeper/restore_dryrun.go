package keeper

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-keeper/nats-keeper/kept"
)

// dryRun replies with the plan and records it; nothing was changed. Its
// Streams say, per stream of the point, what the live data changed since
// it (and, once the methods are planned, the method each gets and why).
func (k *Keeper) dryRun(ctx context.Context, act Act, r Request, pl *restorePlan) (*Reply, error) {
	said := pl.said(r)
	streams, diffSaid := k.dryRunChanges(ctx, pl)
	said += diffSaid
	act.What, act.Outcome = said, "planned"
	k.record(ctx, act)
	return &Reply{Said: said, Plan: &pl.RestorePlan, Positions: pl.Reposition, Moves: pl.Moves, CatchUp: catchUp(pl), Streams: streams}, nil
}

// dryRunLimit bounds each list of names and sequences a dry run's streams
// show; diff-kept gives them all.
const dryRunLimit = kept.ReplySample

// dryRunChanges is the dry run's streams: when the point and live data
// exist, the diff of each stream of the point against the live one, with
// the method the plan gives it and why (withMethods), else the plan's
// changes; and a sentence of their totals. A diff that fails is said, and
// fails nothing: the plan's changes are given.
func (k *Keeper) dryRunChanges(ctx context.Context, pl *restorePlan) ([]kept.StreamChange, string) {
	changes := pl.changes
	if pl.point != nil && pl.arch != nil && len(pl.live) > 0 {
		ds, err := k.diffStreams(ctx, pl.point, pl.arch, dryRunLimit)
		if err != nil {
			k.log.Warn("restore dry run: the diff against the live data failed", "point", sourceName(pl.point), "err", err)
			return pl.changes, fmt.Sprintf(" What the live data changed since the point could not be read: %v.", err)
		}
		changes = withMethods(changesOf(ds), pl.changes)
	}
	if len(changes) == 0 {
		return nil, ""
	}
	return changes, fmt.Sprintf(" Since the point, the live data has %s.", kept.TotalsOf(changes))
}

// said is the reply of a dry run: what the restore would do.
func (pl *restorePlan) said(r Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Dry run, nothing was changed. restore-kept of %s/%s would ", r.Module, r.Local)
	if len(pl.SetAside) > 0 {
		fmt.Fprintf(&b, "set aside %s (%s) and then remove it", strings.Join(pl.SetAside, ", "), HumanBytes(int64(pl.AsideBytes)))
	} else {
		b.WriteString("set nothing aside (none of the kept data is live)")
	}
	if pl.AsideOnly {
		b.WriteString(", and restore nothing.")
		return b.String()
	}
	fmt.Fprintf(&b, ", restore %s (%s) from %s", strings.Join(pl.Restore, ", "), HumanBytes(int64(pl.RestoreBytes)), pl.Point)
	fmt.Fprintf(&b, ", and set back %d consumer position(s)%s.", len(pl.Moves), movesSaid(pl.Moves))
	b.WriteString(pl.methodsSaid)
	if len(pl.Foreign) > 0 {
		fmt.Fprintf(&b, " It would leave alone %d recorded consumer(s) that are not %s's now:%s.", len(pl.Foreign), r.Module, movesSaid(pl.Foreign))
	}
	b.WriteString(pl.unplacedSaid())
	return b.String()
}

// withMethods is the diff's changes with, from the plan's (planned), each
// stream's method and why and what the restore means around it.
func withMethods(diff, planned []kept.StreamChange) []kept.StreamChange {
	for i := range diff {
		for _, p := range planned {
			if p.Stream == diff[i].Stream {
				d := &diff[i]
				d.Method, d.Why, d.Expired, d.BumpedTo, d.Downstream, d.LiveConsumers = p.Method, p.Why, p.Expired, p.BumpedTo, p.Downstream, p.LiveConsumers
			}
		}
	}
	return diff
}
