package keeper

import (
	"context"
	"fmt"
	"io"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// A delta restore sets aside, in the one aside of the restore, only the
// tail of each delta stream: an archive entry like any stream's
// (streams/<s>/stream.arc.s2 and backup.json), holding the live messages
// after the point's last sequence, each with its own sequence, time,
// subject, headers and data, and backup.json the live configuration and
// the tail's state. The aside's record marks the entry a tail after the
// point's last sequence (StreamSum.Base, TailAfter), so it is never taken
// for a whole stream. The module's consumers on a delta stream are not in
// its entry: the aside's positions hold them, read live.

// takeTails is take, but for the streams of tails, whose tail it writes
// (takeTail).
func (k *Keeper) takeTails(tails []deltaStream, take streamSource) streamSource {
	return func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		for i := range tails {
			if tails[i].Stream == stream {
				return k.takeTail(ctx, &tails[i], data, meta)
			}
		}
		return take(ctx, stream, data, meta)
	}
}

// takeTail writes the tail of the delta stream ds: from ds.TailFrom up to
// the stream's last sequence now (ds.TailTo and ds.TailCount follow it,
// should the stream have taken messages since the plan). It closes data
// and meta, as a snapshot does. The tail must hold every live message
// after the point's last sequence: fewer (a message that went meanwhile)
// and the aside is refused.
func (k *Keeper) takeTail(ctx context.Context, ds *deltaStream, data, meta io.WriteCloser) (err error) {
	defer func() {
		data.Close()
		meta.Close()
	}()
	d, err := k.bus.StreamDetail(ctx, ds.Stream)
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", ds.Stream, err)
	}
	if d.LastSeq < ds.TailTo || d.Messages < ds.PointMsgs || d.FirstSeq != ds.PointFirst && ds.PointMsgs > 0 {
		return Errorf(ErrConflict, "stream %s changed since the restore was planned (first sequence %s, last %s, %s), so its point may no longer be a prefix of it",
			ds.Stream, count(d.FirstSeq), count(d.LastSeq), messages(d.Messages))
	}
	ds.TailTo, ds.TailCount = d.LastSeq, d.Messages-ds.PointMsgs
	var tailBytes uint64
	if d.Bytes > ds.PointBytes {
		tailBytes = d.Bytes - ds.PointBytes
	}
	head := busarchive.ArchiveHead{FirstSeq: ds.TailFrom, LastSeq: ds.TailTo, Msgs: ds.TailCount, Bytes: tailBytes}
	w, err := busarchive.NewStreamArchiveWriter(data, head)
	if err != nil {
		return fmt.Errorf("writing the tail of stream %s: %w", ds.Stream, err)
	}
	var n uint64
	var first, last int64
	if ds.TailTo >= ds.TailFrom {
		err = k.bus.Messages(ctx, ds.Stream, ds.TailFrom, ds.TailTo, func(m Message) error {
			if n == 0 {
				first = m.Time
			}
			n, last = n+1, m.Time
			return w.Message(busarchive.ArchivedMessage{Seq: m.Seq, Time: m.Time, Subject: m.Subject, Header: m.Header, Data: m.Data})
		})
		if err != nil {
			return fmt.Errorf("reading the tail of stream %s: %w", ds.Stream, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("writing the tail of stream %s: %w", ds.Stream, err)
	}
	if n != ds.TailCount {
		return Errorf(ErrConflict, "stream %s lost messages of its tail while it was set aside (%s read of %s), so nothing was removed; try again",
			ds.Stream, count(n), count(ds.TailCount))
	}
	doc, err := tailMeta(d.Config, head, first, last, d.NumSubjects)
	if err != nil {
		return fmt.Errorf("writing the tail of stream %s: %w", ds.Stream, err)
	}
	if _, err := meta.Write(doc); err != nil {
		return fmt.Errorf("writing the tail of stream %s: %w", ds.Stream, err)
	}
	return nil
}

// markTails marks, in an aside's streams, those that hold a tail of a
// delta restore from the point at pointRel.
func markTails(ss []StreamSum, tails []deltaStream, pointRel string) {
	for i := range ss {
		for _, ds := range tails {
			if ss[i].Name == ds.Stream {
				ss[i].Base, ss[i].TailAfter = pointRel, ds.PointLast
			}
		}
	}
}

// hasTails reports whether an aside holds a tail of a delta restore, or
// the values a logical restore overwrote: either is not a whole stream.
func hasTails(a *Aside) bool {
	for _, s := range a.Streams {
		if s.Base != "" || s.Logical {
			return true
		}
	}
	return false
}

// deltaIn is the delta of stream s among tails, or nil.
func deltaIn(tails []deltaStream, s string) *deltaStream {
	for i := range tails {
		if tails[i].Stream == s {
			return &tails[i]
		}
	}
	return nil
}
