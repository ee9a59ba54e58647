package keeper

import (
	"context"
	"errors"
	"fmt"
)

// remove deletes the live streams the journal names that are left.
func (x *restoreRun) remove(ctx context.Context) error {
	j := x.j
	for _, s := range j.Remove {
		if contains(j.Removed, s) {
			continue
		}
		seen, err := x.removeCoveredSeen(ctx, x.asides, s)
		if err != nil {
			return fmt.Errorf("removing the live streams failed: %w", err)
		}
		x.sawRemoval(s, seen)
		j.Removed = append(j.Removed, s)
		if err := x.journals.save(ctx, j); err != nil {
			return err
		}
		x.step("removed:" + s)
	}
	return nil
}

// removeCoveredSeen is removeCovered that also returns the stream as it
// stood the moment before it was removed (nil when it was not there).
func (rp runPorts) removeCoveredSeen(ctx context.Context, asides []*Aside, stream string) (*StreamInfo, error) {
	si, err := rp.bus.Stream(ctx, stream)
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
	rp.step("remove:" + stream)
	if err := rp.bus.DeleteStream(ctx, stream); err != nil && !errors.Is(err, ErrNoStream) {
		return nil, fmt.Errorf("deleting stream %s: %w", stream, err)
	}
	return si, nil
}

// sawRemoval records, in the no-late-writes check, a live stream as it
// stood the moment before it was removed (si), against its aside's record.
// si is nil when the stream was not on the bus to be removed.
func (x *restoreRun) sawRemoval(stream string, si *StreamInfo) {
	ev := x.j.Evidence
	if ev == nil {
		return
	}
	f := StreamFigures{Stream: stream, Verdict: Fail}
	held, ok := newestHolding(x.asides, stream)
	if ok {
		f.Want = countOf(held)
	}
	switch {
	case si == nil:
		f.Note = "not checked: it was not on the bus when it was to be removed, so this restore removed nothing of it"
	case !ok:
		f.Note = "no aside holds it"
	default:
		f.Got = countOfInfo(si)
		if sameState(held, si) {
			f.Verdict = Pass
			f.Note = "its last sequence the moment before removal was the aside's"
		} else {
			f.Note = "it changed after it was set aside"
		}
	}
	c := ev.Find(CheckNoWritesAfter)
	if c == nil {
		ev.SetCheck(Check{Name: CheckNoWritesAfter})
		c = ev.Find(CheckNoWritesAfter)
	}
	c.Streams = append(c.Streams, f)
	failed := 0
	for _, s := range c.Streams {
		if s.Verdict != Pass {
			failed++
		}
	}
	c.Verdict = verdictOf(failed == 0)
	c.Said = fmt.Sprintf("%s: %d of %d live stream(s) had the last sequence and no message beyond their aside's the moment before they were removed",
		c.Verdict, len(c.Streams)-failed, len(c.Streams))
}

// removeCovered deletes one stream of the kept data, only if one of the
// asides (the newest that has it) holds it as it stands (sameState). A stream that took new
// messages since, or that no aside holds, is not removed: that would lose
// it. A stream that is not there is not an error.
func (rp runPorts) removeCovered(ctx context.Context, asides []*Aside, stream string) error {
	_, err := rp.removeCoveredSeen(ctx, asides, stream)
	return err
}

// sameState reports whether the live stream si took nothing since s was
// recorded: the same last sequence, and no message the record lacks (fewer
// messages or a later first sequence only mean some expired or were
// deleted, which the record still holds).
func sameState(s StreamSum, si *StreamInfo) bool {
	return s.LastSeq == si.LastSeq && si.Messages <= s.Messages && si.FirstSeq >= s.FirstSeq
}

// newestHolding is the record of stream in the newest aside that holds it
// whole (a delta's tail holds only part of it: StreamSum.Base).
func newestHolding(asides []*Aside, stream string) (StreamSum, bool) {
	for i := len(asides) - 1; i >= 0; i-- {
		for _, s := range asides[i].Streams {
			if s.Name == stream && s.Base == "" {
				return s, true
			}
		}
	}
	return StreamSum{}, false
}
