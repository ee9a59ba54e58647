package kept

import (
	"strconv"
	"strings"
)

// cutStreams is streams with the names and sequences of their lists cut
// for a reply over its bound: each list to its first keep entries, and,
// as a diff-kept page stops at the first list it cannot show whole, every
// list after the first one cut to none; each list shortened is marked cut.
// resume is where the next page begins (the first list cut, after its
// last entry shown), nil when nothing was cut. The streams' other lists
// (downstream, live consumers) are cut to keep too. list counts what it
// cut, as cutReply's lists; inAll and shown count the names and
// sequences.
func cutStreams(streams []StreamChange, keep int, list func(name string, n int) int) (out []StreamChange, resume *DiffCursor, inAll, shown int) {
	if len(streams) == 0 {
		return streams, nil, 0, 0
	}
	out = make([]StreamChange, len(streams))
	for i, s := range streams {
		s.Downstream = s.Downstream[:list("streams."+s.Stream+".downstream", len(s.Downstream))]
		s.LiveConsumers = s.LiveConsumers[:list("streams."+s.Stream+".live-consumers", len(s.LiveConsumers))]
		for _, l := range DiffLists {
			names, cut := diffList(&s, l)
			n := len(names)
			inAll += n
			k := min(n, keep)
			if resume != nil {
				k = 0
			}
			if k < n {
				if resume == nil {
					resume = ResumeAt(s.Stream, l, names[:k])
				}
				setDiffList(&s, l, names[:k], true)
			} else {
				setDiffList(&s, l, names, cut)
			}
			shown += k
		}
		out[i] = s
	}
	return out, resume, inAll, shown
}

// diffList is the list l of s: its entries, and whether it is cut.
func diffList(s *StreamChange, l string) ([]string, bool) {
	switch l {
	case DiffAppended:
		return s.AppendedSeqs, s.SeqsCut
	case DiffRemoved:
		return s.RemovedSeqs, s.SeqsCut
	case DiffKeys:
		if s.Keys != nil {
			return s.Keys.Names, s.Keys.Cut
		}
	case DiffObjects:
		if s.Objects != nil {
			return s.Objects.Names, s.Objects.Cut
		}
	}
	return nil, false
}

// setDiffList sets the list l of s (a copy: the key changes are copied
// before they are changed).
func setDiffList(s *StreamChange, l string, names []string, cut bool) {
	switch l {
	case DiffAppended:
		s.AppendedSeqs, s.SeqsCut = names, s.SeqsCut || cut
	case DiffRemoved:
		s.RemovedSeqs, s.SeqsCut = names, s.SeqsCut || cut
	case DiffKeys:
		if s.Keys != nil {
			k := *s.Keys
			k.Names, k.Cut = names, cut
			s.Keys = &k
		}
	case DiffObjects:
		if s.Objects != nil {
			o := *s.Objects
			o.Names, o.Cut = names, cut
			s.Objects = &o
		}
	}
}

// ResumeAt is the cursor after the last of shown, the entries of the
// list l of stream that a page showed; the list's start when none is
// shown.
func ResumeAt(stream, l string, shown []string) *DiffCursor {
	c := &DiffCursor{Stream: stream, List: l, Start: len(shown) == 0}
	if c.Start {
		return c
	}
	last := shown[len(shown)-1]
	if l == DiffAppended || l == DiffRemoved {
		_, end, _ := strings.Cut(last, "-")
		if end == "" {
			end = last
		}
		seq, err := strconv.ParseUint(end, 10, 64)
		if err != nil {
			return &DiffCursor{Stream: stream, List: l, Start: true}
		}
		c.Seq = seq
		return c
	}
	c.Name = DiffEntryName(last)
	return c
}

// DiffEntryName is the key or object name of an entry of KeyChanges.Names
// ("+k", "~k", "-k": k).
func DiffEntryName(entry string) string {
	if entry != "" && strings.ContainsRune("+~-", rune(entry[0])) {
		return entry[1:]
	}
	return entry
}
