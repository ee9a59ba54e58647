package keeper

import (
	"context"
	"errors"
)

// planPositions works out which of the point's recorded positions are set
// back, and how: the point's own streams carry their consumers; on other
// streams a consumer is moved only if it is still the module's own (its live
// configuration decides, so a consumer that now declares another owner, or
// that a longer module the bus now knows owns, is left alone); one that no
// longer exists is made again from its recorded configuration.
func (k *Keeper) planPositions(ctx context.Context, r Request, pl *restorePlan, removed []StreamInfo) error {
	named := make([]PlanConsumer, len(pl.point.Positions))
	for i, p := range pl.point.Positions {
		named[i] = PlanConsumer{Stream: p.Stream, Consumer: p.Consumer}
	}
	streams, live, err := k.census(ctx, CensusQuery{Module: r.Module, Named: named})
	if err != nil {
		return err
	}
	o, err := k.owners(ctx, streams, r.Module, consumerNames(pl.point.Positions))
	if err != nil {
		return err
	}
	liveOf := map[string]Position{}
	for _, c := range live {
		liveOf[c.Stream+"\x00"+c.Consumer] = c
	}
	for _, pos := range pl.point.Positions {
		mv := Move{Stream: pos.Stream, Consumer: pos.Consumer, To: pos.AckFloor}
		cur, isLive := liveOf[pos.Stream+"\x00"+pos.Consumer]
		if isLive {
			floor := cur.AckFloor
			mv.From = &floor
		}
		if pl.tailOf(pos.Stream) != nil {
			// Put back whole from a delta's tail, which carries no
			// consumer: made again from the aside's record once it is.
			mv.By = MoveCreate
			pl.Moves = append(pl.Moves, mv)
			pl.Reposition = append(pl.Reposition, pos)
			pl.expect = append(pl.expect, expectConsumer(mv, pos, nil, pl.Overrides))
			continue
		}
		if contains(pl.Restore, pos.Stream) {
			mv.By = MoveWithStream
			pl.Moves = append(pl.Moves, mv)
			pl.expect = append(pl.expect, expectConsumer(mv, pos, nil, pl.Overrides))
			continue
		}
		if containsStream(removed, pos.Stream) {
			// A stream of the kept data the point does not carry: the
			// restore sets it aside and removes it, so it is not there to
			// set a consumer on.
			pl.Unplaced = append(pl.Unplaced, pos)
			continue
		}
		_, err := k.bus.Stream(ctx, pos.Stream)
		switch {
		case errors.Is(err, ErrNoStream):
			pl.Unplaced = append(pl.Unplaced, pos)
			continue
		case err != nil:
			return Errorf(ErrFailed, "looking up stream %s: %v", pos.Stream, err)
		}
		judged := pos
		if isLive {
			judged = cur
		}
		if !o.owns(r.Module, r.Local, judged) {
			pl.Foreign = append(pl.Foreign, Move{Stream: pos.Stream, Consumer: pos.Consumer, From: mv.From, To: pos.AckFloor, By: MoveLeft})
			continue
		}
		mv.By = MoveReset
		if !isLive {
			mv.By = MoveCreate
		}
		pl.Moves = append(pl.Moves, mv)
		pl.Reposition = append(pl.Reposition, pos)
		var was *Position
		if isLive {
			was = &cur
		}
		pl.expect = append(pl.expect, expectConsumer(mv, pos, was, pl.Overrides))
	}
	return nil
}
