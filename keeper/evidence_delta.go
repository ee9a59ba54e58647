package keeper

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/kept"
)

// checkDelta reads each delta stream back once its tail is deleted and its
// configuration set back, and adds it to the streams-restored check: its
// messages, bytes and first sequence must be the point's, its last
// sequence the live one when its tail was set aside — never lower.
func (x *restoreRun) checkDelta(ctx context.Context) {
	ev := x.j.Evidence
	if ev == nil || len(x.j.Delta) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, x.evidenceWait)
	defer cancel()
	began := x.now()
	var fs []StreamFigures
	if c := ev.Find(CheckStreams); c != nil {
		fs = c.Streams
	}
	for _, ds := range x.j.Delta {
		fs = append(fs, x.deltaFigures(ctx, ds))
	}
	ev.SetCheck(itemsCheck(CheckStreams, fs, "stream(s) hold the point's messages, bytes and first sequence and the last sequence they must (restored whole: the manifest's; rolled back by delta: the live one, never lower)"))
	ev.Timed("check delta", began, x.now())
}

// deltaFigures is the figures of one delta stream against the point.
func (x *restoreRun) deltaFigures(ctx context.Context, ds deltaStream) StreamFigures {
	want := &StreamCount{Messages: ds.PointMsgs, Bytes: ds.PointBytes, FirstSeq: ds.PointFirst, LastSeq: ds.TailTo}
	if ds.PointMsgs == 0 {
		want.FirstSeq = ds.TailTo + 1 // an empty stream's first sequence is one past its last
	}
	f := StreamFigures{Stream: ds.Stream, Method: kept.MethodDelta, Want: want, Verdict: Fail}
	si, err := x.bus.Stream(ctx, ds.Stream)
	if err != nil {
		f.Note = "not checked: it could not be read after its tail was deleted: " + err.Error()
		return f
	}
	f.Got = countOfInfo(si)
	switch {
	case *f.Got == *want:
		f.Verdict = Pass
		f.Note = fmt.Sprintf("delta: the tail of %s after sequence %s was deleted; the last sequence stays %s", messages(ds.TailCount), count(ds.PointLast), count(ds.TailTo))
	case si.LastSeq > ds.TailTo:
		f.Note = fmt.Sprintf("delta: the stream took messages after its tail was set aside (last sequence now %s); they stay live", count(si.LastSeq))
	case si.LastSeq < ds.TailTo:
		f.Note = "delta: the last sequence went back"
	default:
		f.Note = "delta: the stream does not hold the point's messages"
	}
	return f
}
