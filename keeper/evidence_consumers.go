package keeper

import (
	"context"
	"fmt"
	"strings"
)

// The consumers-at-position check of a restore's evidence: each consumer
// the restore set back read back once the positions are set, against what
// it must be (expectConsumer, consumer_config.go: planned with the restore,
// kept in its journal).

// checkConsumers reads back every consumer the restore set back (or that
// came back with its stream) and compares it with what it must be.
// stopped is the error that stopped setting the positions, if any.
func (x *restoreRun) checkConsumers(ctx context.Context, stopped error) {
	ev := x.j.Evidence
	if ev == nil || x.j.kind() == KindAsideOnly {
		return
	}
	if x.point == nil {
		ev.SetCheck(Check{Name: CheckConsumers, Verdict: Fail,
			Said: "FAIL: not checked: what the restore restored from is gone, so no consumer was set back"})
		return
	}
	if len(x.j.Expect) == 0 && stopped == nil {
		if len(x.j.Reposition) > 0 {
			x.j.Evidence.SetCheck(Check{Name: CheckConsumers, Verdict: Fail,
				Said: "FAIL: not checked: the restore was begun by a keeper that recorded no expected positions"})
		}
		return // no consumer to set back: nothing to check
	}
	ctx, cancel := context.WithTimeout(ctx, x.evidenceWait)
	defer cancel()
	began := x.now()
	infos := map[string]*StreamInfo{}
	streamOf := func(s string) (*StreamInfo, error) {
		if si, ok := infos[s]; ok {
			return si, nil
		}
		si, err := x.bus.Stream(ctx, s)
		if err == nil {
			infos[s] = si
		}
		return si, err
	}
	var fs []ConsumerFigures
	failed := 0
	for _, want := range x.j.Expect {
		got, err := x.bus.Consumer(ctx, want.Stream, want.Consumer)
		si, serr := streamOf(want.Stream)
		f := judgeConsumer(want, got, err, si, serr, x.j.Overrides != nil)
		if f.Verdict != Pass {
			failed++
		}
		fs = append(fs, f)
	}
	v := verdictOf(failed == 0 && stopped == nil)
	said := fmt.Sprintf("%s: %d of %d consumer(s) at their recorded position with their configuration unchanged", v, len(fs)-failed, len(fs))
	if stopped != nil {
		said += "; setting the positions stopped: " + stopped.Error()
	}
	c := Check{Name: CheckConsumers, Verdict: v, Said: said}
	c.Consumers, c.Omitted = boundConsumers(fs)
	ev.SetCheck(c)
	ev.Timed("check consumers", began, x.now())
}

// judgeConsumer is the figures of one consumer the restore set back, as it
// was read (got, or err) with its stream (si, or serr), against what it must
// be (want). overridden says the restore changed its streams' configuration.
func judgeConsumer(want ConsumerFigures, got *Position, err error, si *StreamInfo, serr error, overridden bool) ConsumerFigures {
	f := want
	f.Verdict = Fail
	switch {
	case err != nil:
		f.Note = "not set back: it could not be read: " + err.Error()
		return f
	case serr != nil:
		f.Note = "not checked: its stream could not be read: " + serr.Error()
		return f
	}
	floor := got.AckFloor
	f.GotFloor, f.GotConfig = &floor, configSum(got.Config, f.By == MoveWithStream && overridden)
	same := f.GotConfig == f.WantConfig
	if f.By == MoveWithStream {
		// The point records the snapshot's own position (carried.go);
		// points taken before that recorded it just before the
		// snapshot, so one that acknowledged meanwhile comes back
		// a little ahead.
		at := floor >= f.WantFloor && floor <= si.LastSeq
		f.Verdict = verdictOf(at && same)
		f.Note = "came back with its stream's snapshot, at or after the position recorded for it"
	} else {
		// The reset delivers the recorded floor's next message, or
		// the stream's first one if that one is gone.
		want := max(f.WantFloor, si.FirstSeq-min(si.FirstSeq, 1))
		f.Verdict = verdictOf(floor == want && same)
		if want != f.WantFloor {
			f.Note = fmt.Sprintf("the stream now begins at %d, so the recorded ack floor %d reads %d", si.FirstSeq, f.WantFloor, want)
		}
		f.WantFloor = want
	}
	if !same {
		f.Note = strings.TrimPrefix(f.Note+"; its configuration is not the one it must have", "; ")
	}
	return f
}
