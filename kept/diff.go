package kept

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// VerbDiff says what the live kept data gained, lost and changed since a
// point: read-only, no lease, no server snapshot.
const VerbDiff = "diff-kept"

// Pages of diff-kept. Counts are always whole; the names and sequences
// behind them come in pages. Every list of a reply (a stream's appended
// and removed sequences, a bucket's keys, a store's objects) holds at most
// the request's limit of entries (a sequence range "a-b" is one entry).
// The lists are in page order: the point's streams in its order, then the
// live streams it lacks, and in each stream appended, removed, keys,
// objects. A page shows the lists from its cursor on, and stops at the
// first list it cannot show whole (the limit, or half the reply bound in
// bytes): that list and the ones after it are marked cut (SeqsCut,
// KeyChanges.Cut), and the reply's Next is the cursor to ask again with
// (Request.After). The lists before the cursor show no names on that page.
const (
	// DefaultDiffLimit is the entries of one list when the request names
	// no limit.
	DefaultDiffLimit = 100
	// MaxDiffLimit is the largest limit a diff-kept request may ask for.
	MaxDiffLimit = 10_000
	// MaxDiffCursor bounds a diff-kept cursor: a stream name, a list, and
	// one key or object name, base64-encoded (a subject, so under 4 KiB).
	MaxDiffCursor = 8 << 10
)

// The lists of a stream's change, in page order, as a cursor names them.
const (
	DiffAppended = "appended"
	DiffRemoved  = "removed"
	DiffKeys     = "keys"
	DiffObjects  = "objects"
)

// DiffLists is the lists of a stream's change, in page order.
var DiffLists = [...]string{DiffAppended, DiffRemoved, DiffKeys, DiffObjects}

// DiffCursor is where a diff-kept page resumes: after Seq (appended,
// removed) or after Name (keys, objects) in the list List of stream
// Stream; at its start when Start. Its text (String, ParseDiffCursor) is
//
//	<stream>/<list>/<item>
//
// where item is empty (the list's start), the last sequence shown, or the
// last key or object name shown in unpadded base64url, so the cursor holds
// no space or control character whatever the name holds.
type DiffCursor struct {
	Stream string
	List   string
	Start  bool
	Seq    uint64
	Name   string
}

// String is the cursor's text.
func (c DiffCursor) String() string {
	item := ""
	switch {
	case c.Start:
	case c.List == DiffAppended || c.List == DiffRemoved:
		item = strconv.FormatUint(c.Seq, 10)
	default:
		item = base64.RawURLEncoding.EncodeToString([]byte(c.Name))
	}
	return c.Stream + "/" + c.List + "/" + item
}

// ListIndex is the place of the cursor's list in DiffLists.
func (c DiffCursor) ListIndex() int {
	for i, l := range DiffLists {
		if l == c.List {
			return i
		}
	}
	return -1
}

// ParseDiffCursor reads a cursor diff-kept gave (a reply's Next). Its
// error wraps ErrBadRequest.
func ParseDiffCursor(s string) (DiffCursor, error) {
	bad := func(why string) (DiffCursor, error) {
		return DiffCursor{}, Errorf(ErrBadRequest, "after %q is not a cursor diff-kept gave (<stream>/<list>/<item>): %s", clipText(s), why)
	}
	if len(s) > MaxDiffCursor {
		return DiffCursor{}, Errorf(ErrBadRequest, "after is %d bytes long, over the limit of %d", len(s), MaxDiffCursor)
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c == 0x7f {
			return bad("it holds a space or a control character")
		}
	}
	if !utf8.ValidString(s) {
		return bad("it is not UTF-8")
	}
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return bad("it is not three parts")
	}
	c := DiffCursor{Stream: parts[0], List: parts[1], Start: parts[2] == ""}
	if CheckStreamName("stream", c.Stream) != nil {
		return bad("its stream is not a stream name")
	}
	if c.ListIndex() < 0 {
		return bad("its list is none of appended, removed, keys and objects")
	}
	if c.Start {
		return c, nil
	}
	var err error
	if c.List == DiffAppended || c.List == DiffRemoved {
		if c.Seq, err = strconv.ParseUint(parts[2], 10, 64); err != nil || strconv.FormatUint(c.Seq, 10) != parts[2] {
			return bad("its sequence is not a number")
		}
		return c, nil
	}
	name, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || !utf8.Valid(name) || len(name) == 0 {
		return bad("its name is not unpadded base64url of UTF-8")
	}
	c.Name = string(name)
	return c, nil
}

// checkDiff is diff-kept's check: module and local, and the point by form
// and fingerprint or by from.
func checkDiff(r Request) error {
	if err := ValidName("module", r.Module); err != nil {
		return err
	}
	if err := ValidName("local", r.Local); err != nil {
		return err
	}
	if r.CatchUp != "" {
		return Errorf(ErrBadRequest, "diff-kept takes no catch-up")
	}
	if r.From != "" {
		if r.Fingerprint != "" || r.Form != 0 {
			return Errorf(ErrBadRequest, "diff-kept takes a from, or a form and fingerprint, not both")
		}
		return checkFromShape(r.From)
	}
	return ValidName("fingerprint", r.Fingerprint)
}

// checkDiffPage checks diff-kept's limit and after.
func checkDiffPage(r Request) error {
	if r.Limit < 0 || r.Limit > MaxDiffLimit {
		return Errorf(ErrBadRequest, "limit %d is outside 0..%d", r.Limit, MaxDiffLimit)
	}
	if r.After == "" {
		return nil
	}
	_, err := ParseDiffCursor(r.After)
	return err
}

// DiffLimit is the entries of one list a diff-kept request asks for.
func DiffLimit(r Request) int {
	if r.Limit > 0 {
		return r.Limit
	}
	return DefaultDiffLimit
}

// DiffTotals is what a diff's streams add up to, for its sentence.
type DiffTotals struct {
	Appended, Removed uint64
	Config            int // streams whose config changed
	Added, Changed    int // keys and objects
	Deleted           int
	Gone, New         int // streams not on the bus now, streams the point lacks
}

// TotalsOf sums streams.
func TotalsOf(streams []StreamChange) DiffTotals {
	var t DiffTotals
	for _, s := range streams {
		t.Appended += s.Appended
		t.Removed += s.Removed
		if len(s.Config) > 0 {
			t.Config++
		}
		for _, k := range []*KeyChanges{s.Keys, s.Objects} {
			if k != nil {
				t.Added += k.Added
				t.Changed += k.Changed
				t.Deleted += k.Deleted
			}
		}
		switch {
		case s.Now == nil:
			t.Gone++
		case s.Then == nil:
			t.New++
		}
	}
	return t
}

// String says the totals in words: "1,000 message(s) appended, 12
// removed, the config of 1 stream changed, keys and objects 3 added, 1
// changed, 2 deleted".
func (t DiffTotals) String() string {
	parts := []string{fmt.Sprintf("%s message(s) appended, %s removed", Thousands(t.Appended), Thousands(t.Removed))}
	if t.Config > 0 {
		parts = append(parts, fmt.Sprintf("the config of %d %s changed", t.Config, Plural(t.Config, "stream", "streams")))
	}
	if t.Added+t.Changed+t.Deleted > 0 {
		parts = append(parts, fmt.Sprintf("keys and objects %d added, %d changed, %d deleted", t.Added, t.Changed, t.Deleted))
	}
	if t.Gone > 0 {
		parts = append(parts, fmt.Sprintf("%d %s of the point not on the bus", t.Gone, Plural(t.Gone, "stream", "streams")))
	}
	if t.New > 0 {
		parts = append(parts, fmt.Sprintf("%d %s on the bus the point lacks", t.New, Plural(t.New, "stream", "streams")))
	}
	return strings.Join(parts, ", ")
}

// Thousands writes n with a comma every three digits: 1,000,000.
func Thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
