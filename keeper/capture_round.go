package keeper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// errSegmentFull stops the reading of a stream once the segment holds its
// bytes.
var errSegmentFull = errors.New("the segment is full")

// round writes the next segment: what each stream gained since the last
// one (up to the segment's bytes; more reports that it was cut there), the
// deletes seen, the streams' first sequences and a positions sample. A
// round that finds nothing new writes nothing.
func (c *capturer) round(ctx context.Context) (more bool, err error) {
	g, err := c.gather(ctx)
	if err != nil {
		return false, err
	}
	return c.put(ctx, g)
}

// put writes and commits the gathered segment g, the one after the last
// committed, and moves the capture on to it.
func (c *capturer) put(ctx context.Context, g *gathered) (more bool, err error) {
	k, seg, times := c.k, g.seg, g.times
	changed := false
	for i, f := range c.follows {
		if info := g.infos[i]; f.full || info.Messages != f.expect+countAbove(info, f.next-1) {
			changed = true
		}
	}
	sampled, _ := json.Marshal(seg.Positions)
	if len(g.fresh) == 0 && !changed && bytes.Equal(sampled, c.sampled) {
		return false, c.mark(ctx, c.n, seg.Began)
	}
	// The segment's number is claimed in the index first: a keeper that
	// lost the capture lease without knowing it (paused past its lease)
	// fails here and writes neither archive nor record over the one that
	// took it up.
	if err := c.mark(ctx, seg.N, c.marked); err != nil {
		return false, err
	}
	times.lap("claim")
	if len(g.fresh) > 0 {
		if err := c.writeMessages(ctx, g); err != nil {
			return false, err
		}
	}
	looked := make([]deletesSeen, len(c.follows))
	for i, f := range c.follows {
		var err error
		if looked[i], err = c.deletes(ctx, f, &seg.Streams[i]); err != nil {
			return false, err
		}
	}
	times.lap("deletes")
	seg.Closed, seg.Reached = k.now().UTC(), c.reached(seg)
	if ctx.Err() != nil {
		return false, context.Cause(ctx)
	}
	if _, err := k.putJSON(ctx, segmentRel(c.chain.rel, seg.N)+"/"+segmentFile, seg); err != nil {
		return false, fmt.Errorf("committing segment %d: %w", seg.N, err)
	}
	times.lap("record")
	c.committed(seg, sampled, looked)
	c.lastTook = time.Since(g.began) - g.sampled
	err = c.mark(ctx, c.n, seg.Reached)
	times.lap("mark")
	k.log.Debug("segment committed", append([]any{"kept", c.kept(), "n", seg.N, "bytes", seg.ArchiveSize, "cut", seg.Cut,
		"took", seg.Closed.Sub(seg.Began)}, times.steps...)...)
	return seg.Cut, err
}

// committed moves the capture on to seg, just committed. Only a committed
// segment does: a round that failed is made again from where the last one
// ended, its deletes with it.
func (c *capturer) committed(seg *segment, sampled []byte, looked []deletesSeen) {
	c.n, c.sampled, c.cut = seg.N, sampled, nil
	c.lastSample, c.lastSampleAt = seg.Positions, seg.PositionsAt
	c.lastRead = 0
	for _, ss := range seg.Streams {
		c.lastRead += ss.Bytes
	}
	if seg.Cut {
		c.cut = seg
	}
	for i, f := range c.follows {
		ss := seg.Streams[i]
		f.next, f.expect, f.full = ss.To+1, f.expect+ss.Messages, false
		if l := looked[i]; l.read {
			f.known, f.expect = l.known, l.counted
		}
		f.capped = f.capped || looked[i].capped
	}
	c.k.observe.Captured(c.rec.Module, c.rec.Local, seg.ArchiveSize, seg.Closed)
}

// reached is how far seg takes the window: to when its round read the
// streams' last sequences, what was stored after is in the next segment;
// a stream the segment was cut in holds every message stored before the
// first one it left, which is stored after its last one. Never back.
func (c *capturer) reached(seg *segment) time.Time {
	at := seg.Began
	for _, ss := range seg.Streams {
		switch {
		case ss.To >= ss.Through:
		case ss.Messages > 0:
			at = minTime(at, time.Unix(0, ss.LastTime-1).UTC())
		default:
			at = minTime(at, c.marked)
		}
	}
	if at.Before(c.marked) {
		return c.marked
	}
	return at
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// writeMessages writes the segment's archive: each fresh stream's
// messages as gathered, each let go once written.
func (c *capturer) writeMessages(ctx context.Context, g *gathered) error {
	k, seg, times := c.k, g.seg, g.times
	take := func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		defer data.Close()
		defer meta.Close()
		ss, held := seg.stream(stream), g.held[stream]
		delete(g.held, stream)
		head := busarchive.ArchiveHead{FirstSeq: ss.From, LastSeq: max(ss.To, ss.From-1), Msgs: ss.Messages, Bytes: ss.Bytes}
		w, err := busarchive.NewStreamArchiveWriter(data, head)
		if err != nil {
			return err
		}
		for i := range held {
			if err := w.Message(held[i]); err != nil {
				return err
			}
			held[i] = busarchive.ArchivedMessage{}
		}
		if err := w.Close(); err != nil {
			return err
		}
		doc, err := tailMeta(c.config[stream], head, ss.FirstTime, ss.LastTime, 0)
		if err != nil {
			return err
		}
		_, err = meta.Write(doc)
		return err
	}
	rel := segmentRel(c.chain.rel, seg.N)
	m, w, err := k.writeArchive(ctx, rel, g.fresh, take, k.bus.ServerVersion(), 1, Progress{Verb: VerbCapture, Module: c.rec.Module, Local: c.rec.Local, Step: "segment"})
	if err != nil {
		return fmt.Errorf("writing segment %d: %w", seg.N, err)
	}
	defer w.Abort()
	times.lap("write")
	if m == nil {
		return errors.New("the segment's archive has no manifest")
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	info, err := w.Commit(ctx)
	if err != nil {
		return fmt.Errorf("committing segment %d's archive: %w", seg.N, err)
	}
	times.lap("commit")
	seg.HasArchive, seg.ArchiveSize, seg.ArchiveSum, seg.Sealing = true, info.Size, info.Sum, k.sealingOf(w)
	return nil
}
