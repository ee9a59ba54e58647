package keeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ListKept lists points and asides, optionally of one module / kept data,
// from the index, in the order of their index keys: the asides (by id:
// module, kept data, time), then the points (by module, kept data, form,
// fingerprint). Through the service (a context with a reply bound, see
// WithReplyBound) or with a limit or cursor, it gives one page: at most
// r.Limit of them (DefaultListLimit), after r.After, and no more than half
// the reply bound in records; the reply's Total counts them all and its
// Next is the cursor of the next page. Called in-process with neither, it
// lists every one.
func (k *Keeper) ListKept(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbList, r); err != nil {
		return nil, err
	}
	keys, err := k.listedKeys(ctx, r)
	if err != nil {
		return nil, err
	}
	bound, paged := ReplyBound(ctx)
	paged = paged || r.Limit > 0 || r.After != ""
	limit := len(keys)
	if paged {
		limit = cmp.Or(r.Limit, DefaultListLimit)
	}
	from, _ := slices.BinarySearch(keys, r.After)
	if r.After != "" && from < len(keys) && keys[from] == r.After {
		from++
	}
	page := keys[from:min(len(keys), from+limit)]
	values, err := k.readIndex(ctx, page)
	if err != nil {
		return nil, err
	}
	bytes := -1 // a page unbounded in bytes
	if paged {
		bytes = bound / 2
	}
	points, asides, next := k.decodePage(page, values, bytes)
	if next == "" && from+len(page) < len(keys) {
		next = page[len(page)-1]
	}
	rep := k.listReply(r, len(keys), from == 0, next, points, asides)
	if from == 0 {
		k.listSchedules(ctx, r, rep)
		k.listCaptures(ctx, r, rep)
	}
	return rep, nil
}

// listedKeys are the index keys of the asides, then of the points, of
// everything, a module, or one kept data, as r asks.
func (k *Keeper) listedKeys(ctx context.Context, r Request) ([]string, error) {
	suffix := ""
	if r.Module != "" {
		suffix = r.Module + "."
		if r.Local != "" {
			suffix += r.Local + "."
		}
	}
	var keys []string
	for _, prefix := range []string{"aside." + suffix, "point." + suffix} {
		ks, err := k.listKeys(ctx, prefix)
		if err != nil {
			return nil, Errorf(ErrFailed, "listing the index: %w", err)
		}
		keys = append(keys, ks...)
	}
	return keys, nil
}

// decodePage decodes the records of page, read into values, while they
// fit in bytes (negative: no bound); a record that cannot be decoded is
// logged and left out. next is the cursor after the last record listed
// when the bound stopped the page.
func (k *Keeper) decodePage(page []string, values map[string][]byte, bytes int) (points []Point, asides []Aside, next string) {
	points, asides = []Point{}, []Aside{}
	used := 0
	for i, key := range page {
		data, ok := values[key]
		if !ok {
			continue // removed meanwhile
		}
		// Each record counts its bytes and a line of totals; at least one
		// is listed, so that every page moves on.
		if bytes >= 0 && i > 0 && used+len(data)+listOverhead > bytes {
			return points, asides, page[i-1]
		}
		used += len(data) + listOverhead
		var err error
		if strings.HasPrefix(key, "aside.") {
			var a Aside
			if err = decodeRecord("index record "+key, data, &a); err == nil {
				asides = append(asides, a)
			}
		} else {
			var p Point
			if err = decodeRecord("index record "+key, data, &p); err == nil {
				points = append(points, p)
			}
		}
		var fe *FormatError
		if errors.As(err, &fe) {
			k.log.Warn("index record of a newer format; not listed", "key", key, "err", err)
		} else if err != nil {
			k.log.Warn("index record is not valid JSON; skipped", "key", key, "err", err)
		}
	}
	return points, asides, ""
}

// listReply is list-kept's reply of a page of points and asides out of
// total, first saying whether it is the first page and next the cursor of
// the page after it ("": none): their totals, and what it says of them and
// of the asides that wait for a person.
func (k *Keeper) listReply(r Request, total int, first bool, next string, points []Point, asides []Aside) *Reply {
	of := ListOf(r)
	totals, all := keptTotals(points, asides)
	var said string
	if first && next == "" {
		said = listSaid(len(points), len(asides), of, all)
	} else {
		said = fmt.Sprintf("%d restore point(s) and set-aside copy(ies) of %s in all; this page holds %d restore point(s) and %d set-aside copy(ies), %s.",
			total, of, len(points), len(asides), HumanBytes(all))
		if next != "" {
			said += fmt.Sprintf(" Ask list-kept again with after %q for the next page.", next)
		}
	}
	waiting := k.waiting(asides)
	if len(waiting) > 0 {
		said += fmt.Sprintf(" %d set-aside copy(ies) are older than %s and wait for a person to discard them or put them back: %s.",
			len(waiting), HumanAge(k.asideWarnAfter), strings.Join(waiting, ", "))
	}
	return &Reply{Said: said, Points: points, Asides: asides, Totals: totals, TotalBytes: all, Waiting: waiting,
		Total: total, Next: next}
}

// listOverhead is what a listed record may add to a reply besides its own
// JSON: its line of totals and separators.
const listOverhead = 192

// manyReader is an index that reads many records in one go (jsbus: one
// direct get per thousand keys).
type manyReader interface {
	GetMany(ctx context.Context, keys []string) (map[string][]byte, error)
}

// liveKeyLister is an index that lists its live keys faster than Keys
// (jsbus: one stream info request instead of a watcher over every key).
type liveKeyLister interface {
	LiveKeys(ctx context.Context, prefix string) ([]string, error)
}

// listKeys is Index.Keys, or the index's LiveKeys when it has one.
func (k *Keeper) listKeys(ctx context.Context, prefix string) ([]string, error) {
	if l, ok := k.index.(liveKeyLister); ok {
		return l.LiveKeys(ctx, prefix)
	}
	return k.index.Keys(ctx, prefix)
}

// readIndex reads the records of keys; a key removed meanwhile is absent.
// A key the many-read does not return is read again on its own: the
// many-read may be answered by a replica a little behind (jsbus: a direct
// get), while Get asks the index's leader, so a record written just before
// the list is not left out.
func (k *Keeper) readIndex(ctx context.Context, keys []string) (map[string][]byte, error) {
	values := make(map[string][]byte, len(keys))
	if m, ok := k.index.(manyReader); ok {
		var err error
		if values, err = m.GetMany(ctx, keys); err != nil {
			return nil, Errorf(ErrFailed, "reading the index: %w", err)
		}
	}
	for _, key := range keys {
		if _, ok := values[key]; ok {
			continue
		}
		data, err := k.index.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, Errorf(ErrFailed, "reading %s from the index: %w", key, err)
		}
		values[key] = data
	}
	return values, nil
}

// waiting lists the asides older than the warning age: each waits for a
// person to discard it or put it back.
func (k *Keeper) waiting(asides []Aside) []string {
	var out []string
	now := k.now()
	for _, a := range asides {
		if now.Sub(a.Taken) > k.asideWarnAfter {
			out = append(out, a.ID)
		}
	}
	return out
}

// WarnWaiting logs, once per call, every aside older than the warning age
// (serve calls it once a day).
func (k *Keeper) WarnWaiting(ctx context.Context) {
	rep, err := k.ListKept(ctx, Request{})
	if err != nil {
		k.log.Warn("could not list the set-aside copies to look for old ones", "err", err)
		return
	}
	for _, a := range rep.Asides {
		if contains(rep.Waiting, a.ID) {
			k.log.Warn("a set-aside copy waits for a person: discard it (discard-aside) or put it back (restore-kept from aside/<id>)",
				"aside", a.ID, "reason", a.Reason, "taken", a.Taken, "age", HumanAge(k.now().Sub(a.Taken)),
				"size", HumanBytes(a.ArchiveSize), "caller", a.Caller, "why", a.Why)
		}
	}
}

// humanAge writes a duration as people read an age: 3d4h, 5h12m, 40s.
func HumanAge(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return d.Round(time.Second).String()
}

func (k *Keeper) listIndex(ctx context.Context, prefix string, each func([]byte) error) error {
	keys, err := k.index.Keys(ctx, prefix)
	if err != nil {
		return Errorf(ErrFailed, "listing the index: %w", err)
	}
	for _, key := range keys {
		data, err := k.index.Get(ctx, key)
		if err != nil {
			continue // removed meanwhile
		}
		if err := each(data); err != nil {
			k.log.Warn("index record is not valid JSON; skipped", "key", key, "err", err)
		}
	}
	return nil
}
