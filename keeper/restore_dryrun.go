package keeper

import (
	"context"
	"fmt"
	"strings"
)

// dryRun replies with the plan and records it; nothing was changed.
func (k *Keeper) dryRun(ctx context.Context, act Act, r Request, pl *restorePlan) (*Reply, error) {
	said := pl.said(r)
	act.What, act.Outcome = said, "planned"
	k.record(ctx, act)
	return &Reply{Said: said, Plan: &pl.RestorePlan, Positions: pl.Reposition, Moves: pl.Moves, CatchUp: catchUp(pl), Streams: pl.changes}, nil
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
