package keeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// A round is two steps: gather reads the bus (each stream's state, the
// positions sample, the messages the segment takes, held: the segment's
// bytes bound them), then put writes and commits the segment; only put
// moves the capture on. A segment read while the one before was written
// (tried: segments gathered ahead) made no segment cheaper on a 2-core
// machine whose bus and writers use both cores: the read is the bus's
// work, and both steps then went slower.

// gathered is a segment read from the bus and not yet written.
type gathered struct {
	seg   *segment
	infos []*StreamInfo // each stream's state when the round began, in c.follows' order
	fresh []string      // the streams that gained messages
	held  map[string][]busarchive.ArchivedMessage
	times *roundTimes
	// When the round began, and how long it waited for its positions
	// sample (not the bus's work on its messages).
	began   time.Time
	sampled time.Duration
}

// gather reads the next segment from the bus: each stream from where the
// last committed segment ended up to its last sequence now, within the
// segment's bytes.
func (c *capturer) gather(ctx context.Context) (*gathered, error) {
	k, settings := c.k, c.rec.Settings
	g := &gathered{times: newRoundTimes(), held: map[string][]busarchive.ArchivedMessage{}, began: time.Now()}
	g.seg = &segment{Chain: c.chain.rel, Base: c.chain.base, N: c.n + 1, Began: k.now().UTC(), WrittenBy: k.version}
	for _, f := range c.follows {
		info, err := k.bus.Stream(ctx, f.name)
		if errors.Is(err, ErrNoStream) {
			return nil, fmt.Errorf("%w: stream %s is gone", errChainBroken, f.name)
		}
		if err != nil {
			return nil, err
		}
		if info.Made != f.made || info.LastSeq+1 < f.next {
			return nil, fmt.Errorf("%w: stream %s was made again or lost its tail (last sequence %d, captured up to %d)",
				errChainBroken, f.name, info.LastSeq, f.next-1)
		}
		g.seg.Streams = append(g.seg.Streams, segmentStream{Name: f.name, From: f.next, To: f.next - 1, StreamFirst: info.FirstSeq, Made: f.made, Through: info.LastSeq})
		if info.LastSeq >= f.next {
			g.fresh = append(g.fresh, f.name)
		}
		g.infos = append(g.infos, info)
	}
	g.times.lap("info")
	sampling := time.Now()
	if err := c.positions(ctx, g.seg, c.cut, time.Duration(settings.SegmentEvery)); err != nil {
		return nil, err
	}
	g.sampled = time.Since(sampling)
	g.times.lap("sample")
	if err := c.readFresh(ctx, g, settings.SegmentBytes); err != nil {
		return nil, err
	}
	g.times.lap("read")
	return g, nil
}

// readFresh reads and holds the messages of each fresh stream from its
// From up to its last when the round began (its Through), in turn, cut
// once the segment holds budget bytes.
func (c *capturer) readFresh(ctx context.Context, g *gathered, budget int64) error {
	seg := g.seg
	for _, stream := range g.fresh {
		ss := seg.stream(stream)
		// Held whole (the segment's bytes bound it): the head gives the
		// messages and bytes before the first, and verification holds the
		// archive to them.
		var held []busarchive.ArchivedMessage
		err := c.k.bus.Messages(ctx, stream, ss.From, ss.Through, func(m Message) error {
			if budget <= 0 {
				return errSegmentFull
			}
			if ss.Messages == 0 {
				ss.FirstTime = m.Time
			}
			ss.Messages, ss.LastTime, ss.To = ss.Messages+1, m.Time, m.Seq
			n := int64(len(m.Subject) + len(m.Header) + len(m.Data))
			ss.Bytes += uint64(n)
			budget -= n
			held = append(held, busarchive.ArchivedMessage{Seq: m.Seq, Time: m.Time, Subject: m.Subject, Header: m.Header, Data: m.Data})
			return nil
		})
		if errors.Is(err, errSegmentFull) {
			seg.Cut, err = true, nil
		}
		if err != nil {
			return fmt.Errorf("reading stream %s from sequence %d: %w", stream, ss.From, err)
		}
		if !seg.Cut {
			ss.To = ss.Through // the sequences after the last message read were deleted before it
		}
		if ss.To >= ss.From {
			ss.Unseen = ss.To - ss.From + 1 - ss.Messages
		}
		g.held[stream] = slices.Clip(held)
	}
	return nil
}
