package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
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
	said := fmt.Sprintf("%d restore point(s) and %d set-aside copy(ies) of %s.", len(points), len(asides), of)
	return &Reply{Said: said, Points: points, Asides: asides}, nil
}

func (k *Keeper) listIndex(ctx context.Context, prefix string, each func([]byte) error) error {
	keys, err := k.index.Keys(ctx, prefix)
	if err != nil {
		return errorf(ErrFailed, "listing the index: %w", err)
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
