package keeper

import (
	"fmt"
	"strings"
)

// logicalReply is the reply of a logical restore that ran to its end.
func (k *Keeper) logicalReply(r Request, pl *restorePlan, aside *Aside, set []Position) *Reply {
	var b strings.Builder
	fmt.Fprintf(&b, "Restored %s/%s logically from %s: %s; each written as a new revision, so revisions and times are new, not the point's, and watchers see every key written; nothing was removed",
		r.Module, r.Local, pl.source(), pl.logical.said())
	if aside != nil {
		fmt.Fprintf(&b, "; the live values it overwrote are set aside as %s in %s (a logical aside: it puts back logically)", aside.ID, k.abs(aside.Dir))
	}
	fmt.Fprintf(&b, "; %d consumer position(s) set back on other streams%s, those on the streams written were left where they are.", len(pl.Moves), movesSaid(pl.Moves))
	b.WriteString(pl.unplacedSaid())
	if c := catchUp(pl); c != "" && !pl.logical.fromAside {
		fmt.Fprintf(&b, " The data is at form %d: run %s next.", pl.point.Form, c)
	}
	rep := &Reply{Said: b.String(), Point: pl.point, CatchUp: catchUp(pl), Positions: set, Moves: pl.Moves, Streams: pl.changes}
	if aside != nil {
		rep.Aside, rep.Dir = aside, k.abs(aside.Dir)
	}
	return rep
}

// evidenceFailed is the failure of a logical restore that was done but
// whose evidence fails: the values written stay.
func (x *logicalRun) evidenceFailed(ev *Evidence, werr error) error {
	j := x.j
	var failed []string
	for _, c := range ev.Checks {
		if c.Verdict != Pass {
			failed = append(failed, c.Name+" ("+c.Said+")")
		}
	}
	kept := "no value was set aside, since no key differed"
	if j.Aside != "" {
		kept = fmt.Sprintf("the live values it overwrote stay set aside as %s in %s", j.Aside, x.records.abs(asideRel(j.Aside)))
	}
	return newEvidenceError(ev, Errorf(ErrFailed, "logical restore of %s/%s wrote %s, but its evidence fails: %s; so it is reported as failed. "+
		"The values written are left as they are (a restore is not undone because of its evidence), and %s.%s",
		j.Module, j.Local, x.lp.said(), strings.Join(failed, "; "), kept, x.evidenceSaid(ev, werr)))
}
