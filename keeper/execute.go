package keeper

import (
	"context"
	"errors"
	"fmt"
)

// execute carries a journaled restore on from where its journal stands:
// remove the live streams that are left, restore the point's streams that
// are left, set the positions back. Every stream removed or restored is
// saved in the journal before the next step. A failure puts the aside back
// and says both outcomes. p is nil for aside-only, or when the point is gone
// (recovery then puts the aside back). On success the journal is left open
// for the caller to close once its act is recorded.
//
// asides[0] is the restore's own aside; recovery adds the aside it made of
// what it found on the bus. A stream is removed only when a complete aside
// holds it as it stands (removeCovered), or when this very call began
// restoring it and did not finish.
func (k *Keeper) execute(ctx context.Context, j *journal, asides []*Aside, p *Point) ([]Position, error) {
	what := fmt.Sprintf("restore-kept of %s/%s", j.Module, j.Local)
	if j.Point == "" {
		what = fmt.Sprintf("aside-only of %s/%s", j.Module, j.Local)
	}
	var here []string // streams whose restore this call began
	giveUp := func(err error) ([]Position, error) {
		back, whole := k.putBack(ctx, asides, here)
		if !whole {
			// The journal stays: recovery finishes this once the bus answers.
			return nil, fmt.Errorf("%s: %w; %s; the restore journal stays, so the keeper finishes this restore or puts the aside back when it can",
				what, withKind(ErrFailed, err), back)
		}
		k.closeJournal(ctx, j)
		return nil, fmt.Errorf("%s: %w; %s", what, withKind(ErrFailed, err), back)
	}

	if j.Step == "remove" {
		for _, s := range j.Remove {
			if contains(j.Removed, s) {
				continue
			}
			if err := k.removeCovered(ctx, asides, s); err != nil {
				return giveUp(fmt.Errorf("removing the live streams failed: %w", err))
			}
			j.Removed = append(j.Removed, s)
			if err := k.saveJournal(ctx, j); err != nil {
				return giveUp(err)
			}
			k.hook("removed:" + s)
		}
		if j.Point == "" {
			return nil, nil // the caller closes the journal once its act is recorded
		}
		j.Step = "restore"
		if err := k.saveJournal(ctx, j); err != nil {
			return giveUp(err)
		}
	}
	if p == nil {
		return giveUp(fmt.Errorf("what it restores from, %s, is gone", j.Point))
	}

	if j.Step == "restore" {
		for _, s := range j.Restore {
			if contains(j.Restored, s) {
				continue
			}
			// A stream of this name on the bus now is one a stopped restore
			// began, or one a module made meanwhile: recovery set it aside,
			// and it goes only if that copy holds it as it stands.
			if err := k.removeCovered(ctx, asides, s); err != nil {
				return giveUp(fmt.Errorf("stream %s is in the way of the restore: %w", s, err))
			}
			here = append(here, s)
			_, err := k.restoreArchive(ctx, k.abs(j.Point), []string{s},
				Progress{Verb: VerbRestore, Module: j.Module, Local: j.Local, Step: "restore",
					StreamsDone: len(j.Restored), StreamsTotal: len(j.Restore)}, nil)
			if err != nil {
				return giveUp(fmt.Errorf("restoring from %s failed: %w", sourceName(p), err))
			}
			j.Restored = append(j.Restored, s)
			if err := k.saveJournal(ctx, j); err != nil {
				return giveUp(err)
			}
			k.hook("restored:" + s)
		}
		j.Step = "position"
		if err := k.saveJournal(ctx, j); err != nil {
			return giveUp(err)
		}
	}
	set, err := k.setPositions(ctx, j.Module, j.Local, p, j.Reposition, asides[0])
	if err != nil {
		k.closeJournal(ctx, j)
		return set, err
	}
	k.hook("positions-set")
	// The caller closes the journal once the act is recorded, so a keeper
	// that dies before recording it leaves a journal that recovery finishes
	// (setting the positions again) and records.
	return set, nil
}

// removeCovered deletes one stream of the kept data, only if one of the
// asides (the newest that has it) holds it as it stands (sameState). A stream that took new
// messages since, or that no aside holds, is not removed: that would lose
// it. A stream that is not there is not an error.
func (k *Keeper) removeCovered(ctx context.Context, asides []*Aside, stream string) error {
	si, err := k.bus.Stream(ctx, stream)
	if errors.Is(err, ErrNoStream) {
		return nil
	}
	if err != nil {
		return err
	}
	held, ok := newestHolding(asides, stream)
	if !ok {
		return errorf(ErrConflict, "stream %s is on the bus but in no set-aside copy, so it was not removed", stream)
	}
	if !sameState(held, si) {
		return errorf(ErrConflict, "stream %s changed after it was set aside (last sequence %d, now %d; %d message(s), now %d), so it was not removed",
			stream, held.LastSeq, si.LastSeq, held.Messages, si.Messages)
	}
	k.hook("remove:" + stream)
	if err := k.bus.DeleteStream(ctx, stream); err != nil && !errors.Is(err, ErrNoStream) {
		return fmt.Errorf("deleting stream %s: %w", stream, err)
	}
	return nil
}

// sameState reports whether the live stream si took nothing since s was
// recorded: the same last sequence, and no message the record lacks (fewer
// messages or a later first sequence only mean some expired or were
// deleted, which the record still holds).
func sameState(s StreamSum, si *StreamInfo) bool {
	return s.LastSeq == si.LastSeq && si.Messages <= s.Messages && si.FirstSeq >= s.FirstSeq
}

// newestHolding is the record of stream in the newest aside that holds it.
func newestHolding(asides []*Aside, stream string) (StreamSum, bool) {
	for i := len(asides) - 1; i >= 0; i-- {
		for _, s := range asides[i].Streams {
			if s.Name == stream {
				return s, true
			}
		}
	}
	return StreamSum{}, false
}

// hook calls the configured step hook, used by tests to stop the keeper at
// a chosen step.
func (k *Keeper) hook(step string) {
	if k.stepHook != nil {
		k.stepHook(step)
	}
}
