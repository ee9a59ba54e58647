package keeper

import (
	"fmt"
	"strings"
)

// restoredReply is the reply of a restore that ran to its end.
func (k *Keeper) restoredReply(r Request, pl *restorePlan, aside *Aside, set []Position) *Reply {
	if aside == nil {
		said := fmt.Sprintf("Restored %s/%s from %s: %d stream(s) restored, %d consumer position(s) set back%s; "+
			"nothing was set aside because none of the kept data was live.",
			r.Module, r.Local, pl.source(), len(pl.Restore), len(pl.Moves), movesSaid(pl.Moves))
		said += pl.unplacedSaid() + pl.overridesSaid()
		if c := catchUp(pl); c != "" {
			said += fmt.Sprintf(" The data is at form %d: run %s next.", pl.point.Form, c)
		}
		return &Reply{Said: said, Point: pl.point, CatchUp: catchUp(pl), Positions: set, Moves: pl.Moves, Streams: pl.changes}
	}
	asideDir := k.abs(aside.Dir)
	if r.AsideOnly {
		said := fmt.Sprintf("Set aside %s/%s as %s in %s (%s, %s) and removed it from the bus; nothing was restored.",
			r.Module, r.Local, aside.ID, asideDir, strings.Join(pl.SetAside, ", "), HumanBytes(aside.ArchiveSize))
		return &Reply{Said: said, Aside: aside, Dir: asideDir}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Restored %s/%s from %s: %d stream(s) restored", r.Module, r.Local, pl.source(), len(pl.Restore))
	if len(pl.delta) > 0 {
		fmt.Fprintf(&b, " whole, %d rolled back by delta", len(pl.delta))
	}
	fmt.Fprintf(&b, ", %d consumer position(s) set back%s", len(pl.Moves), movesSaid(pl.Moves))
	fmt.Fprintf(&b, "; the live data as it was is set aside as %s in %s", aside.ID, asideDir)
	if len(pl.delta) > 0 {
		b.WriteString(" (of each stream rolled back by delta, only its tail)")
	}
	b.WriteString(".")
	b.WriteString(pl.methodsSaid + pl.unplacedSaid() + pl.overridesSaid())
	if c := catchUp(pl); c != "" {
		fmt.Fprintf(&b, " The data is at form %d: run %s next.", pl.point.Form, c)
	}
	return &Reply{Said: b.String(), Point: pl.point, Aside: aside, Dir: asideDir,
		CatchUp: catchUp(pl), Positions: set, Moves: pl.Moves, Streams: pl.changes}
}

// evidenceFailed is the failure of a restore that was done but whose
// evidence fails: the data is left as the restore made it.
func (x *restoreRun) evidenceFailed(pl *restorePlan, ev *Evidence, werr error) error {
	j := x.j
	kept := "none of the kept data was live, so nothing was set aside"
	if j.Aside != "" {
		kept = fmt.Sprintf("the live data as it was stays set aside as %s in %s", j.Aside, x.records.abs(asideRel(j.Aside)))
	}
	what := fmt.Sprintf("restored %d stream(s) from %s", len(pl.Restore), pl.source())
	if j.kind() == KindAsideOnly {
		what = "set the live data aside and removed it"
	}
	var failed []string
	for _, c := range ev.Checks {
		if c.Verdict != Pass {
			failed = append(failed, c.Name+" ("+c.Said+")")
		}
	}
	return newEvidenceError(ev, Errorf(ErrFailed, "restore-kept of %s/%s %s, but its evidence fails: %s; so it is reported as failed. "+
		"The restored data is left as it is (a restore is not undone because of its evidence), and %s.%s",
		j.Module, j.Local, what, strings.Join(failed, "; "), kept, x.evidenceSaid(ev, werr)))
}

// unplacedSaid names the recorded positions that cannot be set back because
// their stream is gone, or is one of the kept data's that the point does not
// carry (the restore removes it).
func (pl *restorePlan) unplacedSaid() string {
	if len(pl.Unplaced) == 0 {
		return ""
	}
	var names []string
	for _, p := range pl.Unplaced {
		names = append(names, p.Consumer+" on "+p.Stream)
	}
	return fmt.Sprintf(" %d recorded position(s) cannot be set back because their stream no longer exists, or is not in the point and so is removed: %s.",
		len(pl.Unplaced), strings.Join(names, ", "))
}

// movesSaid lists moves as ": c on s from 20 to 5, …", or "".
func movesSaid(ms []Move) string {
	var b strings.Builder
	for i, m := range ms {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(m.String())
	}
	return b.String()
}

func catchUp(pl *restorePlan) string {
	if pl.point == nil {
		return ""
	}
	return pl.point.CatchUp
}

// source names what the plan restores from, for sentences.
func (pl *restorePlan) source() string {
	if pl.point == nil {
		return "nothing"
	}
	if isAsideRel(pl.pointRel) {
		return sourceName(pl.point)
	}
	return fmt.Sprintf("its restore point f%d-%s", pl.point.Form, pl.point.Fingerprint)
}
