package kept

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ReplySample is how many entries of each long list (positions, moves,
// consumers' figures, points) a reply cut to fit keeps.
const ReplySample = 20

// ReplyCut says what a reply left out to stay under the connection's max
// payload, and where the whole is.
type ReplyCut struct {
	Bytes int       `json:"bytes"`           // the whole reply's JSON, in bytes
	Max   int       `json:"max"`             // the bound the reply had to fit
	Lists []CutList `json:"lists,omitempty"` // each list cut: how many it holds and how many are shown
	Where string    `json:"where"`           // where the whole is
	// Short is set on the short reply sent when even the cut reply could
	// not be: it says the verb was done, names what it made, and nothing
	// more.
	Short bool `json:"short,omitempty"`
}

// CutList is one list of a cut reply: its JSON path, how many entries it
// holds, and how many of the first the reply shows.
type CutList struct {
	Name  string `json:"name"`  // such as "positions" or "point.positions"
	Total int    `json:"total"` // entries in all
	Shown int    `json:"shown"` // the first entries shown (ReplySample, or 0)
}

type replyBoundKey struct{}

// WithReplyBound returns ctx carrying the bound, in bytes, that a verb's
// reply must fit (the service sets it from the connection's max payload):
// list-kept fills a page up to half of it.
func WithReplyBound(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, replyBoundKey{}, n)
}

// ReplyBound is the bound ctx carries, or, with false, DefaultReplyBound.
func ReplyBound(ctx context.Context) (int, bool) {
	if n, ok := ctx.Value(replyBoundKey{}).(int); ok && n > 0 {
		return n, true
	}
	return DefaultReplyBound, false
}

// DefaultReplyBound is the reply bound when none is given: half of NATS's
// default max payload (1 MiB).
const DefaultReplyBound = 512 << 10

// BoundReply returns rep if its JSON fits max bytes; else a copy whose long
// lists keep their first ReplySample entries (or, if that is still too
// long, none), with Cut saying what was left out and where the whole is,
// and a sentence saying so after Said; else, when even that does not fit,
// ShortReply. rep itself is never changed.
func BoundReply(verb string, rep *Reply, max int) *Reply {
	size, err := ReplySize(rep)
	if err != nil || size <= max {
		return rep
	}
	// First the positions and figures, which grow with a module's
	// consumers; then the listings of points and asides too; then all of
	// them to none.
	for _, pass := range []struct {
		keep     int
		listings bool
	}{{ReplySample, false}, {ReplySample, true}, {0, true}} {
		cut := cutReply(verb, rep, pass.keep, pass.listings)
		cut.Cut.Bytes, cut.Cut.Max = size, max
		cut.Said = rep.Said + " " + cutSentence(cut.Cut)
		if b, err := json.Marshal(cut); err == nil && len(b) <= max {
			return cut
		}
	}
	short := ShortReply(verb, rep, size, max, fmt.Errorf("its lists alone are over the bound"))
	if verb == VerbDiff {
		// None of the page's names is shown: the next page begins
		// where this one did.
		if _, resume, _, _ := cutStreams(rep.Streams, 0, func(string, int) int { return 0 }); resume != nil {
			short.Next = resume.String()
		}
	}
	return short
}

// ReplySize is len(json.Marshal(rep)), with the positions of rep, of its
// point and of its aside measured by positionSize instead of written out:
// only their first is written, and each other adds its size and a comma.
// A snapshot's reply holds its module's positions twice, and writing 2,000
// of them out only to measure them took some 7 ms of CPU.
func ReplySize(rep *Reply) (int, error) {
	c, rest := *rep, 0
	first := func(ps []Position) []Position {
		if len(ps) <= 1 {
			return ps
		}
		for _, p := range ps[1:] {
			rest += PositionSize(p) + 1
		}
		return ps[:1]
	}
	c.Positions = first(c.Positions)
	if rep.Point != nil {
		p := *rep.Point
		p.Positions = first(p.Positions)
		c.Point = &p
	}
	if rep.Aside != nil {
		a := *rep.Aside
		a.Positions = first(a.Positions)
		c.Aside = &a
	}
	body, err := json.Marshal(&c)
	return len(body) + rest, err
}

// ShortReply is the reply sent when rep, the reply of a verb that was done,
// cannot be sent (over max even when cut, or refused by the connection with
// why): it says the verb was done, with the first of rep's sentence, the
// point's or aside's names and directory, and the catch-up tool. It is a
// few kilobytes at most.
func ShortReply(verb string, rep *Reply, size, max int, why error) *Reply {
	short := &Reply{Dir: rep.Dir, CatchUp: rep.CatchUp, Total: rep.Total, Next: rep.Next}
	if p := rep.Point; p != nil {
		short.Point = &Point{Module: p.Module, Local: p.Local, Form: p.Form, Fingerprint: p.Fingerprint, CatchUp: p.CatchUp,
			Taken: p.Taken, Dir: p.Dir, ArchiveSize: p.ArchiveSize, ArchiveSum: p.ArchiveSum}
	}
	if a := rep.Aside; a != nil {
		short.Aside = &Aside{ID: a.ID, Module: a.Module, Local: a.Local, Taken: a.Taken, Reason: a.Reason, Point: a.Point,
			Dir: a.Dir, ArchiveSize: a.ArchiveSize, ArchiveSum: a.ArchiveSum}
	}
	short.Cut = &ReplyCut{Bytes: size, Max: max, Short: true, Where: where(rep)}
	short.Said = fmt.Sprintf("%s was done, but its reply (%d bytes) could not be sent whole (%s), so this short one says so; it said: %s",
		verb, size, clipSentence(why.Error(), 256), clipSentence(rep.Said, 1024))
	return short
}

// cutReply copies rep, the reply of verb, with every long list of
// positions, moves, consumers and figures cut to its first keep entries,
// with listings (points, asides, pruned, totals, waiting, the streams'
// names and sequences) too, and Cut listing what was cut.
func cutReply(verb string, rep *Reply, keep int, listings bool) *Reply {
	c := *rep
	cut := &ReplyCut{Where: where(rep)}
	list := func(name string, n int) int {
		if n <= keep {
			return n
		}
		cut.Lists = append(cut.Lists, CutList{Name: name, Total: n, Shown: keep})
		return keep
	}
	c.Positions = c.Positions[:list("positions", len(c.Positions))]
	c.Moves = c.Moves[:list("moves", len(c.Moves))]
	c.Consumers = c.Consumers[:list("consumers", len(c.Consumers))]
	var resume *DiffCursor
	if listings {
		var inAll, shown int
		c.Streams, resume, inAll, shown = cutStreams(c.Streams, keep, list)
		if shown < inAll {
			cut.Lists = append(cut.Lists, CutList{Name: "streams.names", Total: inAll, Shown: shown})
		}
		c.Points = c.Points[:list("points", len(c.Points))]
		c.Asides = c.Asides[:list("asides", len(c.Asides))]
		c.Pruned = c.Pruned[:list("pruned", len(c.Pruned))]
		c.Totals = c.Totals[:list("totals", len(c.Totals))]
		c.Waiting = c.Waiting[:list("waiting", len(c.Waiting))]
	}
	if rep.Point != nil {
		p := *rep.Point
		p.Positions = p.Positions[:list("point.positions", len(p.Positions))]
		c.Point = &p
	}
	if rep.Aside != nil {
		a := *rep.Aside
		a.Positions = a.Positions[:list("aside.positions", len(a.Positions))]
		c.Aside = &a
	}
	if rep.Plan != nil {
		p := *rep.Plan
		p.Reposition = p.Reposition[:list("plan.reposition", len(p.Reposition))]
		p.Moves = p.Moves[:list("plan.moves", len(p.Moves))]
		p.Foreign = p.Foreign[:list("plan.left-alone", len(p.Foreign))]
		p.Unplaced = p.Unplaced[:list("plan.unplaced", len(p.Unplaced))]
		c.Plan = &p
	}
	if rep.Evidence != nil {
		e := *rep.Evidence
		e.Checks = append([]Check(nil), e.Checks...)
		for i, ch := range e.Checks {
			ch.Consumers = ch.Consumers[:list("evidence."+ch.Name+".consumers", len(ch.Consumers))]
			ch.Streams = ch.Streams[:list("evidence."+ch.Name+".streams", len(ch.Streams))]
			e.Checks[i] = ch
		}
		c.Evidence = &e
	}
	// The positions inside listed points and asides count as one list.
	var inAll, shown int
	cutNested := func(ps []Position) []Position {
		inAll += len(ps)
		ps = ps[:min(len(ps), keep)]
		shown += len(ps)
		return ps
	}
	c.Pruned = slices.Clone(c.Pruned)
	for i := range c.Pruned {
		c.Pruned[i].Point.Positions = cutNested(c.Pruned[i].Point.Positions)
	}
	c.Points = slices.Clone(c.Points)
	for i := range c.Points {
		c.Points[i].Positions = cutNested(c.Points[i].Positions)
	}
	c.Asides = slices.Clone(c.Asides)
	for i := range c.Asides {
		c.Asides[i].Positions = cutNested(c.Asides[i].Positions)
	}
	if shown < inAll {
		cut.Lists = append(cut.Lists, CutList{Name: "listed.positions", Total: inAll, Shown: shown})
	}
	c.Cut = cut
	c.Next = listResume(rep, &c)
	if verb == VerbDiff && resume != nil {
		c.Next = resume.String()
	}
	return &c
}

// listResume is the cursor of a cut list-kept page: the key of the last
// record it still shows, so that the next page begins right after it and
// no record is skipped; points come after asides, so a page whose asides
// were cut shows no point. A page that shows no record keeps its cursor
// (ListAllKept refuses a cut page).
func listResume(rep, c *Reply) string {
	if len(c.Asides) < len(rep.Asides) {
		c.Points = nil
		if len(c.Asides) > 0 {
			return AsideKey(c.Asides[len(c.Asides)-1].ID)
		}
		return rep.Next
	}
	if len(c.Points) < len(rep.Points) {
		if len(c.Points) > 0 {
			p := c.Points[len(c.Points)-1]
			return PointKey(p.Module, p.Local, p.Form, p.Fingerprint)
		}
		if len(c.Asides) > 0 {
			return AsideKey(c.Asides[len(c.Asides)-1].ID)
		}
	}
	return rep.Next
}

// where says where the whole of a cut reply is.
func where(rep *Reply) string {
	var at []string
	if rep.Point != nil && rep.Point.Dir != "" {
		at = append(at, "every position the point recorded is kept with it in the store under "+rep.Point.Dir)
	}
	if rep.Aside != nil && rep.Aside.Dir != "" {
		at = append(at, "every position the aside recorded is kept with it in the store under "+rep.Aside.Dir)
	}
	if rep.Evidence != nil && rep.Evidence.Dir != "" {
		at = append(at, "the whole evidence report is "+EvidenceFile+" in the store under "+rep.Evidence.Dir)
	}
	if rep.Points != nil || rep.Asides != nil {
		at = append(at, "list-kept gives the points and asides in pages: ask with a smaller limit")
	}
	if len(rep.Pruned) > 0 {
		at = append(at, "the acts stream records what prune-kept removed")
	}
	if len(rep.Streams) > 0 {
		at = append(at, "the counts are whole, and diff-kept gives every name and sequence in pages (ask again with after set to next, or a smaller limit)")
	}
	if len(at) == 0 {
		return "the keeper's log and acts record the verb"
	}
	return strings.Join(at, "; ")
}

// cutSentence says what a cut reply left out.
func cutSentence(c *ReplyCut) string {
	parts := make([]string, len(c.Lists))
	for i, l := range c.Lists {
		parts[i] = fmt.Sprintf("%s %d of %d", l.Name, l.Shown, l.Total)
	}
	return fmt.Sprintf("This reply was cut to fit the connection's max payload (%d of %d bytes; shown: %s): %s.",
		c.Max, c.Bytes, strings.Join(parts, ", "), c.Where)
}

// clipSentence bounds s to n bytes, on a rune boundary.
func clipSentence(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// PointKey is the index key of a point: point.<module>.<local>.<form>.<fingerprint>.
func PointKey(module, local string, form int, fingerprint string) string {
	return fmt.Sprintf("point.%s.%s.%d.%s", module, local, form, fingerprint)
}

// HumanBytes writes a byte count as people read it: 512 B, 1.5 KiB, 2.0 GiB.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// AsideKey is the index key of an aside: aside.<id>.
func AsideKey(id string) string { return "aside." + id }

// Reasons an aside was made (Aside.Reason).
const (
	ReasonRestore   = "restore"    // a restore replaced the live data
	ReasonAsideOnly = "aside-only" // an aside-only request removed it
	ReasonReplaced  = "replaced"   // a point taken again at the same form and fingerprint replaced this one
	ReasonRecovery  = "recovery"   // recovery found it on the bus under the kept data's names
)

// Plural is one when n is 1, else many: the word a sentence counts n with.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
