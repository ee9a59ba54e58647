package keeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The kinds of journaled restore, each one run of the same machine (run).
const (
	// KindIntoAbsent: none of the kept data was live. Nothing is set aside
	// or removed; a failure removes only what the restore began.
	KindIntoAbsent = "into-absent"
	// KindReplace: the live data was set aside, is removed, and the point
	// is restored in its place; a failure puts the aside back.
	KindReplace = "replace"
	// KindAsideOnly: the live data was set aside and is removed; nothing is
	// restored.
	KindAsideOnly = "aside-only"
)

// The steps of a journaled restore, in order (journal.Step).
const (
	StepRemove   = "remove"   // remove the live streams the aside holds
	StepRestore  = "restore"  // restore the point's streams
	StepPosition = "position" // set the module's consumers back
)

// kind is the journal's kind; journals written before kinds were recorded
// tell it by their aside and point.
func (j *journal) kind() string {
	switch {
	case j.Kind != "":
		return j.Kind
	case j.Aside == "":
		return KindIntoAbsent
	case j.Point == "":
		return KindAsideOnly
	}
	return KindReplace
}

// run is one journaled restore carried on from where its journal stands:
// by a verb right after it wrote the journal, or by recovery after a keeper
// stopped. Every stream removed or restored is saved in the journal before
// the next step.
type run struct {
	k *Keeper
	j *journal
	// asides[0] is the restore's own aside (none for KindIntoAbsent);
	// recovery adds the aside it made of what it found on the bus. A stream
	// is removed only when a complete aside holds it as it stands
	// (removeCovered), or when this very run began restoring it and did
	// not finish.
	asides []*Aside
	point  *Point         // what is restored; nil for aside-only, or when it is gone
	arch   *openedArchive // the point's archive, opened once for the whole restore
	// parallel bounds how many streams are restored at once.
	parallel int
	here     []string // streams whose restore this run began, finished or not
}

// execute runs the remaining steps. A failure undoes what it must (puts the
// aside back, or removes what it began) and says both outcomes; the journal
// stays when the kept data is not whole on the bus again, so recovery
// finishes the work. On success the journal is left open for the caller to
// close once its act is recorded, so a keeper that dies before recording it
// leaves a journal that recovery finishes (setting the positions again).
func (x *run) execute(ctx context.Context) ([]Position, error) {
	j := x.j
	if j.Step == StepRemove {
		if err := x.timed("remove", func() error { return x.remove(ctx) }); err != nil {
			return nil, x.giveUp(ctx, err)
		}
		if j.kind() == KindAsideOnly {
			return nil, nil
		}
		if err := x.advance(ctx, StepRestore); err != nil {
			return nil, x.giveUp(ctx, err)
		}
	}
	if j.Step == StepRestore {
		if x.point == nil || x.arch == nil {
			return nil, x.giveUp(ctx, fmt.Errorf("what it restores from, %s, is gone", j.Point))
		}
		if err := x.timed("restore", func() error { return x.restore(ctx) }); err != nil {
			return nil, x.giveUp(ctx, err)
		}
		x.checkRestored(ctx)
		if err := x.advance(ctx, StepPosition); err != nil {
			return nil, x.giveUp(ctx, err)
		}
	}
	var own *Aside
	if len(x.asides) > 0 {
		own = x.asides[0]
	}
	var set []Position
	err := x.timed("position", func() (err error) {
		set, err = x.k.setPositions(ctx, j.Module, j.Local, x.point, j.Reposition, own)
		return err
	})
	x.checkConsumers(ctx, err)
	if err != nil {
		x.k.closeJournal(ctx, j)
		return set, err
	}
	x.k.hook("positions-set")
	return set, nil
}

func (x *run) source() string {
	if x.point == nil {
		return x.j.Point
	}
	return sourceName(x.point)
}

func (x *run) advance(ctx context.Context, step string) error {
	x.j.Step = step
	return x.k.saveJournal(ctx, x.j)
}

// remove deletes the live streams the journal names that are left.
func (x *run) remove(ctx context.Context) error {
	j := x.j
	for _, s := range j.Remove {
		if contains(j.Removed, s) {
			continue
		}
		seen, err := x.k.removeCoveredSeen(ctx, x.asides, s)
		if err != nil {
			return fmt.Errorf("removing the live streams failed: %w", err)
		}
		x.sawRemoval(s, seen)
		j.Removed = append(j.Removed, s)
		if err := x.k.saveJournal(ctx, j); err != nil {
			return err
		}
		x.k.hook("removed:" + s)
	}
	return nil
}

// restore restores the point's streams that are left, up to x.parallel at
// once. A stream of such a name on the bus now is one a stopped restore
// began, or one a module made meanwhile: recovery set it aside, and it goes
// only if that copy holds it as it stands.
func (x *run) restore(ctx context.Context) error {
	j := x.j
	var left []string
	for _, s := range j.Restore {
		if contains(j.Restored, s) {
			continue
		}
		if err := x.k.removeCovered(ctx, x.asides, s); err != nil {
			return fmt.Errorf("stream %s is in the way of the restore: %w", s, err)
		}
		left = append(left, s)
	}
	if len(left) == 0 {
		return nil
	}
	for try := 1; ; try++ {
		begun, err := x.k.restoreArchive(ctx, x.arch, left, x.parallel, j.Overrides,
			Progress{Verb: VerbRestore, Module: j.Module, Local: j.Local, Step: "restore",
				StreamsDone: len(j.Restored), StreamsTotal: len(j.Restore)}, func(s string) {
				j.Restored = append(j.Restored, s)
				if err := x.k.saveJournal(ctx, j); err != nil {
					// Recovery would restore this stream again: safe, only slower.
					x.k.log.Warn("could not record a restored stream in the restore journal", "stream", s, "err", err)
				}
				x.k.hook("restored:" + s)
			})
		// Every stream this run began, finished or not, is removed if the
		// run gives up: the aside is then put back whole.
		x.here = append(x.here, begun...)
		if err == nil {
			return nil
		}
		again := errors.Is(err, ErrNoBus) || errors.Is(err, ErrStaleStream)
		if try == busTries || !again || ctx.Err() != nil || !x.removeUnfinished(ctx, begun) {
			return fmt.Errorf("restoring from %s failed: %w", sourceName(x.point), err)
		}
		// The bus went away part way (a server of the cluster died), or
		// the server still held files of a stream removed just before: what
		// this try began and did not finish is removed; begin those again.
		x.k.log.Warn("a restore was cut short by the bus or by files the server had not yet removed; restoring the unfinished streams again", "try", try, "err", err)
		left = slices.DeleteFunc(left, func(s string) bool { return contains(j.Restored, s) })
		select {
		case <-ctx.Done():
			return fmt.Errorf("restoring from %s failed: %w", sourceName(x.point), err)
		case <-time.After(min(time.Duration(try)*time.Second, busPauseMax)):
		}
	}
}

// removeUnfinished removes the streams of begun that the run did not finish
// restoring (a server that lost the restore may have removed them itself),
// and reports whether none is left.
func (x *run) removeUnfinished(ctx context.Context, begun []string) bool {
	for _, s := range begun {
		if contains(x.j.Restored, s) {
			continue
		}
		if err := x.k.bus.DeleteStream(ctx, s); err != nil && !errors.Is(err, ErrNoStream) {
			x.k.log.Warn("could not remove a half-restored stream to restore it again", "stream", s, "err", err)
			return false
		}
	}
	return true
}

// giveUp undoes a run that failed, and returns the error that says both
// outcomes.
func (x *run) giveUp(ctx context.Context, err error) error {
	j := x.j
	back, whole := x.k.putBack(ctx, x.asides, x.here)
	switch j.kind() {
	case KindIntoAbsent:
		if back == "" {
			back = "nothing was restored"
		}
		if !whole {
			back += "; the restore journal stays, so the keeper takes this restore up again when the bus answers"
		} else {
			x.k.closeJournal(ctx, j)
		}
		// The server may have refused a damaged stream before the keeper's
		// own reading found the damage: tell a damaged point from a failed
		// restore.
		var damaged *DamagedError
		if x.arch != nil && !errors.As(err, &damaged) && ctx.Err() == nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNoBus) {
			if _, _, verr := x.k.verifyArchive(ctx, x.arch); verr != nil {
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
	x.k.closeJournal(ctx, j)
	return fmt.Errorf("%s: %w; %s", what, withKind(ErrFailed, err), back)
}

// removeCovered deletes one stream of the kept data, only if one of the
// asides (the newest that has it) holds it as it stands (sameState). A stream that took new
// messages since, or that no aside holds, is not removed: that would lose
// it. A stream that is not there is not an error.
func (k *Keeper) removeCovered(ctx context.Context, asides []*Aside, stream string) error {
	_, err := k.removeCoveredSeen(ctx, asides, stream)
	return err
}

// removeCoveredSeen is removeCovered that also returns the stream as it
// stood the moment before it was removed (nil when it was not there).
func (k *Keeper) removeCoveredSeen(ctx context.Context, asides []*Aside, stream string) (*StreamInfo, error) {
	si, err := k.bus.Stream(ctx, stream)
	if errors.Is(err, ErrNoStream) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	held, ok := newestHolding(asides, stream)
	if !ok {
		return nil, Errorf(ErrConflict, "stream %s is on the bus but in no set-aside copy, so it was not removed", stream)
	}
	if !sameState(held, si) {
		return nil, Errorf(ErrConflict, "stream %s changed after it was set aside (last sequence %d, now %d; %d message(s), now %d), so it was not removed",
			stream, held.LastSeq, si.LastSeq, held.Messages, si.Messages)
	}
	k.hook("remove:" + stream)
	if err := k.bus.DeleteStream(ctx, stream); err != nil && !errors.Is(err, ErrNoStream) {
		return nil, fmt.Errorf("deleting stream %s: %w", stream, err)
	}
	return si, nil
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
