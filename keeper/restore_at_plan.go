package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// momentPlan is what the point of a moment is made of.
type momentPlan struct {
	at           time.Time  // the moment (at-seq: the newest message kept)
	segs         []*segment // the chain's segments that may hold messages of the moment
	positions    []Position
	positionsAge time.Duration
	unseen       uint64 // messages stored around the moment and deleted before the capture read them
	streams      map[string]*momentStream
}

// momentStream is one stream's part of a moment.
type momentStream struct {
	name        string
	cut         uint64 // at-seq: the last sequence (0: by time)
	first, last uint64
	deleted     [][2]uint64 // sorted ranges recorded by the segments closed by the moment
	// listsBase says deleted holds every sequence the base's stream had
	// no message at: the chain's first segment, which records the
	// stream's whole deleted list, is closed by the moment.
	listsBase  bool
	rollupAll  uint64
	rollupSub  map[string]uint64
	perSubject int64
	lastN      map[string][]uint64 // per subject the last perSubject sequences the segments keep
	baseExcess map[string]int      // per subject how many of the base's messages the limit drops, oldest first
	maxAge     time.Duration
	config     json.RawMessage
	// untrackedFrom is when the segment before the first one that no
	// longer records the stream's deletes was closed (the base's taking,
	// for the first segment): deletes since are not recorded (zero: the
	// segments closed by the moment record them all).
	untrackedFrom time.Time
}

// planMoment reads the chain's segment records and, for each stream, what
// the moment keeps of its segments' messages (a first pass over them).
func (k *storeView) planMoment(ctx context.Context, ch *chain, base *Point, mo momentAt, end time.Time) (*momentPlan, error) {
	pl := &momentPlan{at: mo.at, streams: map[string]*momentStream{}}
	for _, s := range base.Streams {
		if mo.seq != nil {
			if _, ok := mo.seq[s.Name]; !ok {
				return nil, Errorf(ErrBadRequest, "at-seq names no sequence for stream %s of the kept data; a restore to sequences names every stream", s.Name)
			}
		}
		pl.streams[s.Name] = &momentStream{name: s.Name, cut: mo.seq[s.Name], first: s.FirstSeq, last: s.LastSeq,
			rollupSub: map[string]uint64{}, lastN: map[string][]uint64{}, baseExcess: map[string]int{}}
	}
	for name := range mo.seq {
		if pl.streams[name] == nil {
			return nil, Errorf(ErrBadRequest, "at-seq names stream %s, which is not in the kept data's base", name)
		}
	}
	pl.segs = segmentsOf(ch.segments, mo)
	if mo.seq != nil {
		at, err := k.momentOfSeqs(ctx, pl, base, end)
		if err != nil {
			return nil, err
		}
		pl.at = at
	}
	tracked := base.Taken // when the segment before was closed: deletes up to then are recorded
	for _, seg := range ch.segments {
		if seg.Closed.After(pl.at) {
			break
		}
		for _, ss := range seg.Streams {
			if ms := pl.streams[ss.Name]; ms != nil {
				ms.deleted = append(ms.deleted, ss.Deleted...)
				ms.first = max(ms.first, ss.StreamFirst)
				ms.listsBase = ms.listsBase || !ss.Untracked // the first lists the base's gaps, unless untracked
				if ss.Untracked && ms.untrackedFrom.IsZero() {
					ms.untrackedFrom = tracked
				}
			}
		}
		tracked = seg.Closed
	}
	pl.unseen = unseenAround(ch.segments, pl.at, base.Taken)
	pl.positions, pl.positionsAge = base.Positions, 0
	for i, seg := range ch.segments {
		if i == 0 || !seg.PositionsAt.After(pl.at) {
			pl.positions, pl.positionsAge = seg.Positions, pl.at.Sub(seg.PositionsAt)
		}
		if seg.PositionsAt.After(pl.at) {
			break
		}
	}
	bases, err := k.openStored(ctx, base.Dir, base)
	if err != nil {
		return nil, fmt.Errorf("opening the base %s: %w", base.Dir, err)
	}
	defer bases.Close()
	for _, ms := range pl.streams {
		ms.deleted = mergeRanges(ms.deleted)
		meta, err := bases.StreamMeta(ms.name)
		if err != nil {
			return nil, err
		}
		doc, err := readMeta(meta)
		if err != nil {
			return nil, err
		}
		if ms.config, _, err = configOf(doc); err != nil {
			return nil, err
		}
		var limits struct {
			PerSubject int64 `json:"max_msgs_per_subject"`
			MaxAge     int64 `json:"max_age"`
		}
		_ = json.Unmarshal(ms.config, &limits)
		ms.perSubject, ms.maxAge = limits.PerSubject, time.Duration(limits.MaxAge)
		if err := k.eachSegmentMessage(ctx, pl, ms, ms.firstPass); err != nil {
			return nil, err
		}
		if err := ms.countBase(ctx, bases); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// segmentsOf are the segments that may hold messages of the moment: up to
// and with the first whose round began after it and was not cut (every
// message stored by then was read in it or before).
func segmentsOf(segs []*segment, mo momentAt) []*segment {
	for i, s := range segs {
		if mo.seq != nil {
			done := true
			for name, n := range mo.seq {
				if ss := s.stream(name); ss == nil || ss.To < n {
					done = false
				}
			}
			if done { // and the next, which holds the first message after them
				return segs[:min(i+2, len(segs))]
			}
			continue
		}
		if s.Began.After(mo.at) && !s.Cut { // and the next: messages are kept by their own times anyway
			return segs[:min(i+2, len(segs))]
		}
	}
	return segs
}

// momentOfSeqs is the time of an at-seq moment: the last instant at which
// each stream's last sequence was at most the one asked, that is just
// before the first message after them was stored (the window's end when
// none was), but never before the newest message kept. The deletes, the
// first sequences and the positions sample of the moment are those the
// capture had seen by then.
func (k *storeView) momentOfSeqs(ctx context.Context, pl *momentPlan, base *Point, end time.Time) (time.Time, error) {
	kept, next := base.Taken, end
	for _, ms := range pl.streams {
		err := k.eachSegmentMessage(ctx, pl, ms, func(_ *momentPlan, m busarchive.ArchivedMessage) error {
			t := time.Unix(0, m.Time).UTC()
			switch {
			case m.Seq <= ms.cut && t.After(kept):
				kept = t
			case m.Seq > ms.cut && t.Before(next):
				next = t
			}
			return nil
		})
		if err != nil {
			return time.Time{}, err
		}
	}
	if at := next.Add(-time.Nanosecond); at.After(kept) {
		return at, nil
	}
	return kept, nil
}

// readStream reads every message of stream in the opened archive a,
// checked against its manifest to the end.
func readStream(ctx context.Context, a *openedArchive, stream string, fn func(busarchive.ArchivedMessage) error) error {
	r, err := a.CheckedStreamData(ctx, stream)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := busarchive.ReadStreamArchive(r, nil, fn); err != nil {
		return fmt.Errorf("reading stream %s from %s: %w", stream, a.Where, err)
	}
	_, err = io.Copy(io.Discard, r)
	return err
}

// eachSegmentMessage calls fn with each message of ms's stream in the
// plan's segments, in order.
func (k *storeView) eachSegmentMessage(ctx context.Context, pl *momentPlan, ms *momentStream, fn func(*momentPlan, busarchive.ArchivedMessage) error) error {
	for _, seg := range pl.segs {
		ss := seg.stream(ms.name)
		if !seg.HasArchive || ss == nil || ss.Messages == 0 {
			continue
		}
		rel := segmentRel(seg.Chain, seg.N)
		a, err := k.openStored(ctx, rel, &Point{Dir: rel, ArchiveSize: seg.ArchiveSize, ArchiveSum: seg.ArchiveSum, Sealing: seg.Sealing})
		if err != nil {
			return fmt.Errorf("opening segment %d: %w", seg.N, err)
		}
		err = readStream(ctx, a, ms.name, func(m busarchive.ArchivedMessage) error { return fn(pl, m) })
		a.Close()
		if len(busarchive.Problems(err)) > 0 {
			err = &DamagedError{Path: a.Where, Problems: problemSentences(err)}
		}
		if err != nil {
			return fmt.Errorf("reading segment %d: %w", seg.N, err)
		}
	}
	return nil
}

// unseenAround is how many messages the segment that read what was stored
// around at (and the segments cut at their bytes after it) found deleted
// before it read them.
func unseenAround(segs []*segment, at, began time.Time) uint64 {
	if at.Before(began) {
		return 0
	}
	var n uint64
	for _, s := range segs {
		if !at.Before(s.Began) {
			continue
		}
		for _, ss := range s.Streams {
			n += ss.Unseen
		}
		if !s.Cut {
			break
		}
	}
	return n
}

// mergeRanges sorts inclusive ranges and folds those that overlap or
// touch, so that a binary search finds the one holding a sequence.
func mergeRanges(rs [][2]uint64) [][2]uint64 {
	slices.SortFunc(rs, func(a, b [2]uint64) int { return compareUint(a[0], b[0]) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}
