package keeper

import (
	"context"
	"slices"
)

// deletesSeen is what a round's look at a stream's deleted details found,
// for the capture to take once its segment is committed.
type deletesSeen struct {
	read    bool     // the details were read
	known   []uint64 // every deleted sequence then
	counted uint64   // the live messages up to the segment's To then
	capped  bool     // too many to track
}

// deletes records in ss the sequences up to ss.To deleted since the last
// look (all of them, at a chain's first round), reading the stream's
// deleted details only when its count says something was removed. What it
// found is taken by the capture once the segment is committed.
func (c *capturer) deletes(ctx context.Context, f *follow, ss *segmentStream) (deletesSeen, error) {
	if f.capped {
		ss.Untracked = true
		return deletesSeen{}, nil
	}
	if !f.full {
		info, err := c.k.bus.Stream(ctx, f.name)
		if err != nil {
			return deletesSeen{}, err
		}
		if info.Messages == f.expect+ss.Messages+countAbove(info, ss.To) && info.FirstSeq == ss.StreamFirst {
			return deletesSeen{}, nil
		}
	}
	d, err := c.k.bus.StreamDetail(ctx, f.name)
	if err != nil {
		return deletesSeen{}, err
	}
	if len(d.Deleted) > c.k.trackedDeletes {
		c.k.log.Warn("a captured stream holds too many deleted sequences to track; its deletes are recorded no further", "stream", f.name, "deleted", len(d.Deleted))
		ss.Untracked = true
		return deletesSeen{capped: true}, nil
	}
	// Every sequence up to To deleted since the last look, those this
	// segment read included (deleted after it read them: a moment before
	// the segment's close still holds them).
	var fresh []uint64
	for _, seq := range d.Deleted {
		if seq > ss.To {
			break
		}
		if _, found := slices.BinarySearch(f.known, seq); !found || f.full {
			fresh = append(fresh, seq)
		}
	}
	ss.Deleted = ranges(fresh)
	ss.StreamFirst = d.FirstSeq
	return deletesSeen{read: true, known: slices.Clone(d.Deleted), counted: liveBelow(d, ss.To+1)}, nil
}

// countAbove is how many sequences the stream holds above seq, none of
// them deleted as far as a count tells.
func countAbove(info *StreamInfo, seq uint64) uint64 {
	if info.LastSeq <= seq {
		return 0
	}
	return info.LastSeq - seq
}

// ranges folds sorted sequences into inclusive ranges.
func ranges(seqs []uint64) [][2]uint64 {
	var out [][2]uint64
	for _, s := range seqs {
		if n := len(out); n > 0 && out[n-1][1]+1 == s {
			out[n-1][1] = s
			continue
		}
		out = append(out, [2]uint64{s, s})
	}
	return out
}
