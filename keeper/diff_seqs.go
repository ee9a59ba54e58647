package keeper

import (
	"fmt"
	"slices"
)

// The sequence arithmetic of a diff. Messages are immutable: between a
// point and now a stream can only gain messages after its last sequence and
// lose messages anywhere. So every live message at or below the point's
// last sequence is one the point holds, and the point's own gaps are still
// gaps live; what the point holds that is no longer live is counted from
// the live first and last sequence and deleted set alone, without reading
// the point's messages.

// liveSeqs is a live stream's sequences as its details give them: first
// and last, and the deleted ones between them, sorted.
type liveSeqs struct {
	first, last uint64
	deleted     []uint64
}

// has reports whether seq holds a live message.
func (l liveSeqs) has(seq uint64) bool {
	if seq < l.first || seq > l.last || l.last == 0 {
		return false
	}
	_, found := slices.BinarySearch(l.deleted, seq)
	return !found
}

// count is how many live messages lie in lo..hi.
func (l liveSeqs) count(lo, hi uint64) uint64 {
	lo, hi = max(lo, l.first), min(hi, l.last)
	if l.last == 0 || lo > hi {
		return 0
	}
	a, _ := slices.BinarySearch(l.deleted, lo)
	b, found := slices.BinarySearch(l.deleted, hi)
	if found {
		b++
	}
	return hi - lo + 1 - uint64(b-a)
}

// each calls fn with every live sequence range in lo..hi, in order, until
// fn returns false.
func (l liveSeqs) each(lo, hi uint64, fn func(a, b uint64) bool) {
	lo, hi = max(lo, l.first), min(hi, l.last)
	if l.last == 0 || lo > hi {
		return
	}
	i, _ := slices.BinarySearch(l.deleted, lo)
	cur := lo
	for ; i < len(l.deleted) && l.deleted[i] <= hi; i++ {
		if d := l.deleted[i]; d > cur {
			if !fn(cur, d-1) {
				return
			}
		}
		cur = l.deleted[i] + 1
	}
	if cur <= hi {
		fn(cur, hi)
	}
}

// eachDeleted calls fn with every deleted sequence in lo..hi, in order,
// until fn returns false.
func (l liveSeqs) eachDeleted(lo, hi uint64, fn func(seq uint64) bool) {
	i, _ := slices.BinarySearch(l.deleted, lo)
	for ; i < len(l.deleted) && l.deleted[i] <= hi; i++ {
		if !fn(l.deleted[i]) {
			return
		}
	}
}

// seqCounts is what a diff counts of one stream's sequences.
type seqCounts struct {
	appended          uint64 // live messages after the point's last sequence
	tailFirst         uint64 // the first of them (0: none)
	removed           uint64 // the point's messages no longer live
	extra             uint64 // live messages at or below the point's last that the point lacks: the stream was made again
	gaps              uint64 // the point's own deleted sequences inside its first..last
	pointFirst, point uint64 // the point's first and last sequence
}

// countSeqs counts a point's stream (first, last, msgs: its state) against
// the live one.
func countSeqs(first, last, msgs uint64, live liveSeqs) seqCounts {
	c := seqCounts{pointFirst: first, point: last}
	if msgs > 0 && last >= first {
		c.gaps = last - first + 1 - min(msgs, last-first+1)
		kept := live.count(first, last)
		c.removed = msgs - min(kept, msgs)
		c.extra = live.count(0, last) - kept
	} else {
		c.extra = live.count(0, last)
	}
	c.appended = live.count(last+1, ^uint64(0))
	live.each(last+1, ^uint64(0), func(a, _ uint64) bool { c.tailFirst = a; return false })
	return c
}

// rangeList collects ascending sequences as ranges, those after a cursor,
// at most limit ranges; cut says some were left out.
type rangeList struct {
	after  uint64 // only sequences above it are taken
	limit  int
	ranges [][2]uint64
	cut    bool
}

// add takes the sequences a..b; it returns false once the list is full
// and a range had to be left out.
func (r *rangeList) add(a, b uint64) bool {
	a = max(a, r.after+1)
	if a > b || r.after == ^uint64(0) {
		return true
	}
	if n := len(r.ranges); n > 0 && r.ranges[n-1][1]+1 == a {
		r.ranges[n-1][1] = b
		return true
	}
	if len(r.ranges) >= r.limit {
		r.cut = true
		return false
	}
	r.ranges = append(r.ranges, [2]uint64{a, b})
	return true
}

// strings is the ranges as a reply names them: "a-b", or "n".
func (r *rangeList) strings() []string {
	out := make([]string, len(r.ranges))
	for i, x := range r.ranges {
		if x[0] == x[1] {
			out[i] = fmt.Sprint(x[0])
		} else {
			out[i] = fmt.Sprintf("%d-%d", x[0], x[1])
		}
	}
	return out
}

// appendedRanges lists the live sequences after last into into.
func appendedRanges(last uint64, live liveSeqs, into *rangeList) {
	live.each(last+1, ^uint64(0), into.add)
}

// removedRanges lists the point's messages (first..last, without gaps of
// its own) no longer live into into, from the live sequences alone.
func removedRanges(first, last uint64, live liveSeqs, into *rangeList) {
	if live.last == 0 {
		into.add(first, last)
		return
	}
	if first < live.first && !into.add(first, min(last, live.first-1)) {
		return
	}
	ok := true
	live.eachDeleted(max(first, live.first), min(last, live.last), func(seq uint64) bool {
		ok = into.add(seq, seq)
		return ok
	})
	if ok && last > live.last {
		into.add(max(first, live.last+1), last)
	}
}
