package kept

import (
	"fmt"
	"sort"
	"strings"
)

// Pages of list-kept.
const (
	// DefaultListLimit is how many points and asides one page of list-kept
	// holds at most when the request names no limit.
	DefaultListLimit = 500
	// MaxListLimit is the largest limit a list-kept request may ask for.
	MaxListLimit = 1000
	// maxCursor bounds the after cursor: an index key.
	maxCursor = 512
)

// ListOf names what a list-kept request lists: everything, a module, or
// module/local.
func ListOf(r Request) string {
	switch {
	case r.Module == "":
		return "everything"
	case r.Local == "":
		return r.Module
	}
	return r.Module + "/" + r.Local
}

// ListSaid is the sentence of a listing of points and asides of of.
func ListSaid(points, asides int, of string, bytes int64) string {
	return fmt.Sprintf("%d restore point(s) and %d set-aside copy(ies) of %s, %s in all.", points, asides, of, HumanBytes(bytes))
}

// MergeList joins the pages of one listing of of (ListOf), in order, into
// one reply as an unpaged listing gives it: every point and aside, the
// totals of each kept data and of all, and the waiting asides.
func MergeList(of string, pages []*Reply) *Reply {
	m := &Reply{Points: []Point{}, Asides: []Aside{}}
	for _, p := range pages {
		m.Points = append(m.Points, p.Points...)
		m.Asides = append(m.Asides, p.Asides...)
		m.Waiting = append(m.Waiting, p.Waiting...)
		m.Schedules = append(m.Schedules, p.Schedules...)
	}
	m.Totals, m.TotalBytes = KeptTotals(m.Points, m.Asides)
	m.Total = len(m.Points) + len(m.Asides)
	m.Said = ListSaid(len(m.Points), len(m.Asides), of, m.TotalBytes)
	if len(m.Waiting) > 0 {
		m.Said += fmt.Sprintf(" %d set-aside copy(ies) are older than the keeper's warning age and wait for a person to discard them or put them back: %s.",
			len(m.Waiting), strings.Join(m.Waiting, ", "))
	}
	return m
}

// checkListPage checks list-kept's limit and after (only list-kept takes
// them: CheckFields).
func checkListPage(r Request) error {
	if r.Limit < 0 || r.Limit > MaxListLimit {
		return Errorf(ErrBadRequest, "limit %d is outside 0..%d", r.Limit, MaxListLimit)
	}
	return CheckCursor(r.After)
}

// CheckCursor checks a list-kept cursor (a page's Next): empty, or an
// index key of a point or an aside, at most 512 bytes of printable ASCII
// with no space or wildcard.
func CheckCursor(after string) error {
	if after == "" {
		return nil
	}
	if len(after) > maxCursor {
		return Errorf(ErrBadRequest, "after is %d bytes long, over the limit of %d", len(after), maxCursor)
	}
	if !strings.HasPrefix(after, "point.") && !strings.HasPrefix(after, "aside.") {
		return Errorf(ErrBadRequest, "after %q is not a cursor list-kept gave (one begins point. or aside.)", clipText(after))
	}
	for _, c := range []byte(after) {
		if c <= ' ' || c >= 0x7f || c == '*' || c == '>' {
			return Errorf(ErrBadRequest, "after %q is not a cursor list-kept gave (it holds a space, a wildcard or a byte that is not printable ASCII)", clipText(after))
		}
	}
	return nil
}

// clipText shortens s for a sentence.
func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// KeptTotals sums the points and asides of each kept data, and all of them.
func KeptTotals(points []Point, asides []Aside) ([]KeptTotal, int64) {
	by := map[string]*KeptTotal{}
	get := func(module, local string) *KeptTotal {
		key := module + "/" + local
		if by[key] == nil {
			by[key] = &KeptTotal{Module: module, Local: local}
		}
		return by[key]
	}
	var all int64
	for _, p := range points {
		t := get(p.Module, p.Local)
		t.Points++
		t.PointBytes += p.ArchiveSize
		all += p.ArchiveSize
	}
	for _, a := range asides {
		t := get(a.Module, a.Local)
		t.Asides++
		t.AsideBytes += a.ArchiveSize
		all += a.ArchiveSize
	}
	out := make([]KeptTotal, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].Local < out[j].Local
	})
	return out, all
}
