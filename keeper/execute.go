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
func (k *Keeper) execute(ctx context.Context, j *journal, a *Aside, p *Point) ([]Position, error) {
	what := fmt.Sprintf("restore-kept of %s/%s", j.Module, j.Local)
	if j.Point == "" {
		what = fmt.Sprintf("aside-only of %s/%s", j.Module, j.Local)
	}
	giveUp := func(err error, begun []string) ([]Position, error) {
		back, whole := k.putBack(ctx, a, begun)
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
			if err := k.removeSetAside(ctx, a, s); err != nil {
				return giveUp(fmt.Errorf("removing the live streams failed: %w", err), nil)
			}
			j.Removed = append(j.Removed, s)
			if err := k.saveJournal(ctx, j); err != nil {
				return giveUp(err, nil)
			}
			k.hook("removed:" + s)
		}
		if j.Point == "" {
			return nil, nil // the caller closes the journal once its act is recorded
		}
		j.Step = "restore"
		if err := k.saveJournal(ctx, j); err != nil {
			return giveUp(err, nil)
		}
	}
	if p == nil {
		return giveUp(fmt.Errorf("its restore point %s is gone", j.Point), j.Restored)
	}

	if j.Step == "restore" {
		for _, s := range j.Restore {
			if contains(j.Restored, s) {
				continue
			}
			// Every live stream is removed by now: a stream of this name is
			// one this restore began and did not finish.
			if err := k.bus.DeleteStream(ctx, s); err != nil && !errors.Is(err, ErrNoStream) {
				return giveUp(fmt.Errorf("removing the half-restored stream %s failed: %w", s, err), j.Restored)
			}
			_, err := k.restoreArchive(ctx, k.abs(j.Point), []string{s},
				Progress{Verb: VerbRestore, Module: j.Module, Local: j.Local, Step: "restore",
					StreamsDone: len(j.Restored), StreamsTotal: len(j.Restore)}, nil)
			if err != nil {
				return giveUp(fmt.Errorf("restoring from %s failed: %w", pointName(p), err), append(j.Restored, s))
			}
			j.Restored = append(j.Restored, s)
			if err := k.saveJournal(ctx, j); err != nil {
				return giveUp(err, j.Restored)
			}
			k.hook("restored:" + s)
		}
		j.Step = "position"
		if err := k.saveJournal(ctx, j); err != nil {
			return giveUp(err, j.Restored)
		}
	}
	set, err := k.setPositions(ctx, j.Module, j.Local, p, j.Reposition, a)
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

// removeSetAside deletes one live stream that is in the aside, unless it
// took new messages since it was set aside: those would be lost.
func (k *Keeper) removeSetAside(ctx context.Context, a *Aside, stream string) error {
	si, err := k.bus.Stream(ctx, stream)
	if errors.Is(err, ErrNoStream) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, s := range a.Streams {
		if s.Name == stream && s.LastSeq != si.LastSeq {
			return errorf(ErrConflict, "stream %s took new messages after it was set aside (last sequence %d, now %d), so it was not removed",
				stream, s.LastSeq, si.LastSeq)
		}
	}
	k.hook("remove:" + stream)
	if err := k.bus.DeleteStream(ctx, stream); err != nil && !errors.Is(err, ErrNoStream) {
		return fmt.Errorf("deleting stream %s: %w", stream, err)
	}
	return nil
}

// hook calls the configured step hook, used by tests to stop the keeper at
// a chosen step.
func (k *Keeper) hook(step string) {
	if k.stepHook != nil {
		k.stepHook(step)
	}
}
