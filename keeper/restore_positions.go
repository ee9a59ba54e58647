package keeper

import (
	"context"
	"fmt"
)

// positionsStep is a run's last step, whatever its method: the module's
// consumers set back (setPositions), timed, and checked for the evidence.
// A failure closes the journal: the streams are done, and what is not set
// back is said.
func (x *restoreRun) positionsStep(ctx context.Context) ([]Position, error) {
	var own *Aside
	if len(x.asides) > 0 {
		own = x.asides[0]
	}
	var set []Position
	err := x.timed("position", func() (err error) {
		set, err = x.setPositions(ctx, own)
		return err
	})
	x.checkConsumers(ctx, err)
	if err != nil {
		x.journals.close(ctx, x.j)
		return set, err
	}
	x.step("positions-set")
	return set, nil
}

// setPositions sets back the module's consumers on streams the point does
// not carry (the journal's Reposition); a is the restore's own aside.
func (x *restoreRun) setPositions(ctx context.Context, a *Aside) ([]Position, error) {
	module, local, p, ps := x.j.Module, x.j.Local, x.point, x.j.Reposition
	if p == nil {
		return []Position{}, nil // aside-only: nothing is set back
	}
	set := []Position{}
	for _, pos := range ps {
		if err := x.bus.SetPosition(ctx, pos); err != nil {
			keptAt := "nothing was set aside because none of it was live"
			if a != nil {
				keptAt = fmt.Sprintf("the live data as it was is set aside as %s in %s", a.ID, x.records.abs(a.Dir))
			}
			return set, Errorf(ErrFailed, "restore-kept of %s/%s restored every stream of %s, but setting consumer %s on %s "+
				"back to sequence %d failed (%v), after %d of %d position(s) were set; %s",
				module, local, sourceName(p), pos.Consumer, pos.Stream, pos.AckFloor, err, len(set), len(ps), keptAt)
		}
		set = append(set, pos)
		x.step("position-set:" + pos.Stream + "/" + pos.Consumer)
	}
	return set, nil
}
