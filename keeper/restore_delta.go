package keeper

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// StepDelta is the step of a journaled restore that rolls its delta
// streams back: each one's tail deleted, then its configuration set back.
// It comes after every full stream was removed and restored, so a run that
// gives up (puts its aside back) has deleted no tail; from it on the run
// only goes forward: a delete that fails leaves the journal, and the keeper
// finishes the deletes when it starts again or the bus answers (a delete
// is idempotent). The tail is in the restore's aside all along.
const StepDelta = "delta"

// deleteBatch bounds the sequences of one DeleteMessages call, and so what
// a crash can leave half done of one stream between two journal saves.
const deleteBatch = 1000

// delta deletes each delta stream's tail and sets its configuration back,
// saving the journal after each.
func (x *restoreRun) delta(ctx context.Context) error {
	j := x.j
	for i := range j.Delta {
		ds := &j.Delta[i]
		if !ds.Deleted {
			if err := x.deleteTail(ctx, ds); err != nil {
				return err
			}
			ds.Deleted = true
			if err := x.journals.save(ctx, j); err != nil {
				return err
			}
			x.step("tail-deleted:" + ds.Stream)
		}
		if ds.ConfigSet {
			continue
		}
		if ds.Config != nil {
			err := x.bus.UpdateStream(ctx, ds.Config)
			if err != nil && !errors.Is(err, ErrNoStream) {
				return fmt.Errorf("setting the configuration of stream %s back to the point's failed: %w", ds.Stream, err)
			}
		}
		ds.ConfigSet = true
		if err := x.journals.save(ctx, j); err != nil {
			return err
		}
		x.step("config-set:" + ds.Stream)
	}
	return nil
}

// deleteTail deletes the messages of ds's tail (TailFrom..TailTo) that are
// still live, deleteBatch at a time. Messages a module wrote after the
// tail was set aside (above TailTo) are not touched: they stay live, and
// the evidence says so. A stream no longer on the bus has nothing to
// delete (the evidence says it is gone).
func (x *restoreRun) deleteTail(ctx context.Context, ds *deltaStream) error {
	d, err := x.bus.StreamDetail(ctx, ds.Stream)
	if errors.Is(err, ErrNoStream) {
		x.log.Error("a stream to roll back by delta is gone from the bus; its tail is in the restore's aside", "stream", ds.Stream, "aside", x.j.Aside)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading stream %s to delete its tail: %w", ds.Stream, err)
	}
	seqs := tailSeqs(max(ds.TailFrom, d.FirstSeq), min(ds.TailTo, d.LastSeq), d.Deleted, deleteBatch)
	for n := 0; len(seqs) > 0; n++ {
		if err := x.bus.DeleteMessages(ctx, ds.Stream, seqs); err != nil {
			return fmt.Errorf("deleting the tail of stream %s (sequences %s to %s) failed: %w", ds.Stream, count(ds.TailFrom), count(ds.TailTo), err)
		}
		if n == 0 {
			x.step("mid-delete:" + ds.Stream)
		}
		seqs = tailSeqs(seqs[len(seqs)-1]+1, min(ds.TailTo, d.LastSeq), d.Deleted, deleteBatch)
	}
	return nil
}

// tailSeqs is at most most sequences of from..to that are not in the
// sorted set deleted, in order.
func tailSeqs(from, to uint64, deleted []uint64, most int) []uint64 {
	var out []uint64
	i := sort.Search(len(deleted), func(i int) bool { return deleted[i] >= from })
	for s := from; s <= to && len(out) < most; s++ {
		for i < len(deleted) && deleted[i] < s {
			i++
		}
		if i < len(deleted) && deleted[i] == s {
			continue
		}
		out = append(out, s)
		if s == ^uint64(0) {
			break
		}
	}
	return out
}

// deltaStopped is the error of a run stopped in its delta step: nothing is
// put back (the tails deleted so far stay deleted); the journal stays, so
// the keeper finishes the deletes when it starts again or the bus answers.
func (x *restoreRun) deltaStopped(err error) error {
	j := x.j
	whole := ""
	if len(j.Restore) > 0 {
		whole = "the streams restored whole are on the bus, and "
	}
	return fmt.Errorf("restore-kept of %s/%s: %w; %sthe tails of the delta stream(s) are in aside %s in %s "+
		"(a tail is put back exactly with a restore-kept from aside/%s; republishing it would keep its data, not its sequences); "+
		"the restore journal stays, so the keeper finishes deleting the tails when it can",
		j.Module, j.Local, withKind(ErrFailed, err), whole, j.Aside, x.records.abs(asideRel(j.Aside)), j.Aside)
}
