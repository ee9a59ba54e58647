package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ListKept lists points and asides, optionally of one module / kept data,
// from the index.
func (k *Keeper) ListKept(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbList, r); err != nil {
		return nil, err
	}
	suffix := ""
	if r.Module != "" {
		suffix = r.Module + "."
		if r.Local != "" {
			suffix += r.Local + "."
		}
	}
	points := []Point{}
	asides := []Aside{}
	if err := k.listIndex(ctx, "point."+suffix, func(data []byte) error {
		var p Point
		if err := json.Unmarshal(data, &p); err != nil {
			return err
		}
		points = append(points, p)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := k.listIndex(ctx, "aside."+suffix, func(data []byte) error {
		var a Aside
		if err := json.Unmarshal(data, &a); err != nil {
			return err
		}
		asides = append(asides, a)
		return nil
	}); err != nil {
		return nil, err
	}
	sort.Slice(points, func(i, j int) bool { return points[i].Taken.Before(points[j].Taken) })
	sort.Slice(asides, func(i, j int) bool { return asides[i].Taken.Before(asides[j].Taken) })
	of := "everything"
	if r.Module != "" {
		of = r.Module
		if r.Local != "" {
			of += "/" + r.Local
		}
	}
	totals, all := keptTotals(points, asides)
	said := fmt.Sprintf("%d restore point(s) and %d set-aside copy(ies) of %s, %s in all.", len(points), len(asides), of, HumanBytes(all))
	waiting := k.waiting(asides)
	if len(waiting) > 0 {
		said += fmt.Sprintf(" %d set-aside copy(ies) are older than %s and wait for a person to discard them or put them back: %s.",
			len(waiting), HumanAge(k.asideWarnAfter), strings.Join(waiting, ", "))
	}
	return &Reply{Said: said, Points: points, Asides: asides, Totals: totals, TotalBytes: all, Waiting: waiting}, nil
}

// keptTotals sums the points and asides of each kept data, and all of them.
func keptTotals(points []Point, asides []Aside) ([]KeptTotal, int64) {
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
