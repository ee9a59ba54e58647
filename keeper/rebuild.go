package keeper

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// Rebuild brings the index's point.* and aside.* records in line with the
// store, which is the truth: every committed point and aside is recorded,
// and every record without its point or aside is removed. Plans are
// left alone. It returns how many records it wrote and removed.
func (k *Keeper) Rebuild(ctx context.Context) (written, removed int, err error) {
	k.files.Lock()
	defer k.files.Unlock()
	want := map[string][]byte{}
	points, err := k.scanPoints(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range points {
		want[pointKey(p.Module, p.Local, p.Form, p.Fingerprint)] = pointRecord(p)
	}
	asides, err := k.scanAsides(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, a := range asides {
		want[asideKey(a.ID)] = asideRecord(a)
	}
	for _, prefix := range []string{"point.", "aside."} {
		keys, err := k.index.Keys(ctx, prefix)
		if err != nil {
			return written, removed, Errorf(ErrFailed, "listing the index: %w", err)
		}
		for _, key := range keys {
			if _, ok := want[key]; ok {
				continue
			}
			if err := k.index.Delete(ctx, key); err != nil {
				return written, removed, Errorf(ErrFailed, "removing stale index record %s: %w", key, err)
			}
			removed++
		}
	}
	for key, data := range want {
		have, err := k.index.Get(ctx, key)
		if err == nil && string(have) == string(data) {
			continue
		}
		if err := k.index.Put(ctx, key, data); err != nil {
			return written, removed, Errorf(ErrFailed, "writing index record %s: %w", key, err)
		}
		written++
	}
	if written+removed > 0 {
		k.log.Info("index rebuilt from the files", "written", written, "removed", removed)
	}
	return written, removed, nil
}

// scanPoints reads every committed point's point.json.
func (k *Keeper) scanPoints(ctx context.Context) ([]*Point, error) {
	keys, err := k.recordKeys(ctx, pointsDir, pointFile, 4)
	if err != nil {
		return nil, err
	}
	var out []*Point
	for _, key := range keys {
		rel := path.Dir(key)
		var p Point
		if err := k.getJSON(ctx, key, &p); err != nil {
			k.log.Warn("not a readable restore point; left out of the index", "dir", k.abs(rel), "err", err)
			continue
		}
		if pointRel(p.Module, p.Local, p.Form, p.Fingerprint) != rel {
			k.log.Warn("point.json names another place; left out of the index", "dir", k.abs(rel))
			continue
		}
		out = append(out, &p)
	}
	return out, nil
}

func (k *Keeper) scanAsides(ctx context.Context) ([]*Aside, error) {
	keys, err := k.recordKeys(ctx, asideDir, asideFile, 2)
	if err != nil {
		return nil, err
	}
	var out []*Aside
	for _, key := range keys {
		rel := path.Dir(key)
		var a Aside
		if err := k.getJSON(ctx, key, &a); err != nil {
			k.log.Warn("not a readable set-aside copy; left out of the index", "dir", k.abs(rel), "err", err)
			continue
		}
		if asideRel(a.ID) != rel {
			k.log.Warn("aside.json names another id; left out of the index", "dir", k.abs(rel))
			continue
		}
		out = append(out, &a)
	}
	return out, nil
}

// recordKeys lists the records (name) under top whose prefix has depth
// elements: points/<m>/<l>/<f>/point.json, aside/<id>/aside.json.
func (k *Keeper) recordKeys(ctx context.Context, top, name string, depth int) ([]string, error) {
	objs, err := k.store.List(ctx, top+"/")
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", k.abs(top), err)
	}
	var out []string
	for _, o := range objs {
		if path.Base(o.Key) == name && len(strings.Split(path.Dir(o.Key), "/")) == depth {
			out = append(out, o.Key)
		}
	}
	return out, nil
}
