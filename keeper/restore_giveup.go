package keeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// giveUp undoes a run that failed, and returns the error that says both
// outcomes.
func (x *restoreRun) giveUp(ctx context.Context, err error) error {
	j := x.j
	back, whole := x.putBack(ctx)
	switch j.kind() {
	case KindIntoAbsent:
		if back == "" {
			back = "nothing was restored"
		}
		if !whole {
			back += "; the restore journal stays, so the keeper takes this restore up again when the bus answers"
		} else {
			x.journals.close(ctx, j)
		}
		// The server may have refused a damaged stream before the keeper's
		// own reading found the damage: tell a damaged point from a failed
		// restore.
		var damaged *DamagedError
		if x.arch != nil && !errors.As(err, &damaged) && ctx.Err() == nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNoBus) {
			if _, _, verr := verifyOpened(ctx, x.arch); verr != nil {
				err = fmt.Errorf("%w (the point is damaged: %w)", err, verr)
			}
		}
		return fmt.Errorf("restore-kept of %s/%s from %s failed: %w; %s, and nothing live was touched (none of the kept data was live)",
			j.Module, j.Local, x.source(), withKind(ErrFailed, err), back)
	}
	what := fmt.Sprintf("restore-kept of %s/%s", j.Module, j.Local)
	if j.kind() == KindAsideOnly {
		what = fmt.Sprintf("aside-only of %s/%s", j.Module, j.Local)
	}
	if !whole {
		// The journal stays: recovery finishes this once the bus answers.
		return fmt.Errorf("%s: %w; %s; the restore journal stays, so the keeper finishes this restore or puts the aside back when it can",
			what, withKind(ErrFailed, err), back)
	}
	x.journals.close(ctx, j)
	return fmt.Errorf("%s: %w; %s", what, withKind(ErrFailed, err), back)
}

// putBack undoes a restore that failed after live streams may have been
// removed: it deletes the streams this run began restoring (x.here), then
// brings back from the restore's aside (asides[0]) every one of its streams
// that is not on the bus as the aside holds it. A stream in the way goes
// only if an aside holds it as it stands (removeCovered); otherwise it stays
// and the kept data is not whole yet. It asks the bus rather than trusting
// what the keeper believes it removed: a delete whose reply was lost may
// have happened. It returns a sentence that says both outcomes, and whether
// the kept data is whole on the bus again.
func (x *restoreRun) putBack(ctx context.Context) (string, bool) {
	asides, here := x.asides, x.here
	var notes []string
	var stuck []string
	for _, s := range here {
		if err := x.bus.DeleteStream(ctx, s); err != nil && !errors.Is(err, ErrNoStream) {
			stuck = append(stuck, fmt.Sprintf("%s (%v)", s, err))
		}
	}
	if len(here) > 0 {
		if len(stuck) == 0 {
			notes = append(notes, fmt.Sprintf("the half-restored stream(s) %s were removed", strings.Join(here, ", ")))
		} else {
			notes = append(notes, "the half-restored stream(s) "+strings.Join(stuck, ", ")+" could not be removed")
		}
	}
	if len(asides) == 0 {
		return strings.Join(notes, "; "), len(stuck) == 0
	}
	aside := asides[0]
	if len(stuck) > 0 {
		notes = append(notes, fmt.Sprintf("so the live data was not put back yet; it is complete in aside %s in %s",
			aside.ID, x.records.abs(aside.Dir)))
		return strings.Join(notes, "; "), false
	}
	var missing []string
	for _, st := range aside.Streams {
		if st.Base != "" {
			// A delta stream's tail: a run gives up only before its delta
			// step (restore_delta.go), so no tail was deleted; the stream
			// is live as it was, and the aside's tail is a copy.
			continue
		}
		si, err := x.bus.Stream(ctx, st.Name)
		switch {
		case errors.Is(err, ErrNoStream):
			missing = append(missing, st.Name)
			continue
		case err != nil:
			notes = append(notes, fmt.Sprintf("whether stream %s is on the bus could not be told (%v), so the live data was not put back yet; it is complete in aside %s in %s",
				st.Name, err, aside.ID, x.records.abs(aside.Dir)))
			return strings.Join(notes, "; "), false
		}
		if sameState(st, si) {
			continue // never removed
		}
		if err := x.removeCovered(ctx, asides[1:], st.Name); err != nil {
			notes = append(notes, fmt.Sprintf("%v, so the live data was not put back yet; it is complete in aside %s in %s",
				err, aside.ID, x.records.abs(aside.Dir)))
			return strings.Join(notes, "; "), false
		}
		missing = append(missing, st.Name)
	}
	if len(missing) == 0 {
		notes = append(notes, "no live stream had been removed")
		notes = append(notes, fmt.Sprintf("the aside %s in %s stays as a copy", aside.ID, x.records.abs(aside.Dir)))
		return strings.Join(notes, "; "), true
	}
	a, err := x.records.openArchive(ctx, aside.Dir, asidePoint(aside))
	if err == nil {
		_, err = x.restoreArchive(ctx, a, missing, nil, // an aside goes back as it was
			Progress{Verb: VerbRestore, Module: aside.Module, Local: aside.Local, Step: "put back"}, nil, nil)
		a.Close()
	}
	if err != nil {
		notes = append(notes, fmt.Sprintf("putting the live data back from aside %s failed too (%v); it is complete in %s",
			aside.ID, err, x.records.abs(aside.Dir)))
		return strings.Join(notes, "; "), false
	}
	notes = append(notes, fmt.Sprintf("the live data was put back from aside %s (%s), which stays in %s",
		aside.ID, strings.Join(missing, ", "), x.records.abs(aside.Dir)))
	return strings.Join(notes, "; "), true
}
