package keeper

import (
	"github.com/nats-keeper/nats-keeper/kept"
)

// diffPage says which names and sequences one page of a diff lists (see
// kept.DiffCursor): at most limit entries a list, the lists from the
// cursor after on (nil: from the first), in the order of the streams
// order (the point's, then the live ones it lacks).
type diffPage struct {
	limit int
	after *kept.DiffCursor
	at    int // the index of the cursor's stream in the order
}

// from says whether the page lists the list l of the stream at index i,
// and from where: after the cursor in its own list, else from the start.
func (pg *diffPage) from(i int, l string) (bool, kept.DiffCursor) {
	start := kept.DiffCursor{Start: true}
	c := pg.after
	if c == nil || i > pg.at {
		return true, start
	}
	li := (&kept.DiffCursor{List: l}).ListIndex()
	switch {
	case i < pg.at || li < c.ListIndex():
		return false, start
	case li > c.ListIndex():
		return true, start
	}
	return true, *c
}

// fitPage stops a page at its first list cut, by the limit or by bytes,
// the names and sequences of all its lists to at most bytes in JSON (but
// for its first entry, always shown): the
// lists after it show nothing and are marked cut. It returns the cursor of
// the next page, "" when the page shows every list to its end.
func fitPage(ds []streamDiff, bytes int) string {
	var next *kept.DiffCursor
	used := 0
	for i := range ds {
		d := &ds[i]
		for li, l := range kept.DiffLists {
			names := d.list(l)
			if next != nil {
				d.cut[li] = d.cut[li] || len(names) > 0
				d.setList(l, nil)
				continue
			}
			// The page's first entry is shown whatever its size, so that
			// every page moves on.
			n := 0
			for n < len(names) && (used == 0 || used+entrySize(names[n]) <= bytes) {
				used += entrySize(names[n])
				n++
			}
			if n < len(names) || d.cut[li] {
				next = kept.ResumeAt(d.Change.Stream, l, names[:n])
				d.cut[li] = true
				d.setList(l, names[:n])
			}
		}
		d.markCuts()
	}
	if next == nil {
		return ""
	}
	return next.String()
}

// list is d's list l.
func (d *streamDiff) list(l string) []string {
	c := &d.Change
	switch l {
	case kept.DiffAppended:
		return c.AppendedSeqs
	case kept.DiffRemoved:
		return c.RemovedSeqs
	case kept.DiffKeys:
		if c.Keys != nil {
			return c.Keys.Names
		}
	case kept.DiffObjects:
		if c.Objects != nil {
			return c.Objects.Names
		}
	}
	return nil
}

// setList sets d's list l.
func (d *streamDiff) setList(l string, names []string) {
	c := &d.Change
	switch {
	case l == kept.DiffAppended:
		c.AppendedSeqs = names
	case l == kept.DiffRemoved:
		c.RemovedSeqs = names
	case l == kept.DiffKeys && c.Keys != nil:
		c.Keys.Names = names
	case l == kept.DiffObjects && c.Objects != nil:
		c.Objects.Names = names
	}
}

// markCuts says in d's change which of its lists are cut.
func (d *streamDiff) markCuts() {
	c := &d.Change
	c.SeqsCut = d.cut[0] || d.cut[1]
	if c.Keys != nil {
		c.Keys.Cut = d.cut[2]
	}
	if c.Objects != nil {
		c.Objects.Cut = d.cut[3]
	}
}

// entrySize is the bytes the JSON of one name or range takes in a list,
// at most: quotes, a comma, and each byte JSON may escape as \u00XX.
func entrySize(s string) int {
	n := 3
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			n += 6
		default:
			n++
		}
	}
	return n
}
