package keeper

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
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
		keys, err := k.listKeys(ctx, prefix)
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
	// The records as they stand, read in batches (one request per
	// thousand on the bus), not one request each.
	have, err := k.readIndex(ctx, slices.Sorted(maps.Keys(want)))
	if err != nil {
		return written, removed, err
	}
	for key, data := range want {
		if h, ok := have[key]; ok && string(h) == string(data) {
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
	for i, p := range readRecords[Point](ctx, k, keys) {
		rel := path.Dir(keys[i])
		switch {
		case p.err != nil:
			k.log.Warn("not a readable restore point; left out of the index", "dir", k.abs(rel), "err", p.err)
		case pointRel(p.v.Module, p.v.Local, p.v.Form, p.v.Fingerprint) != rel:
			k.log.Warn("point.json names another place; left out of the index", "dir", k.abs(rel))
		default:
			out = append(out, p.v)
		}
	}
	return out, nil
}

func (k *Keeper) scanAsides(ctx context.Context) ([]*Aside, error) {
	keys, err := k.recordKeys(ctx, asideDir, asideFile, 2)
	if err != nil {
		return nil, err
	}
	var out []*Aside
	for i, a := range readRecords[Aside](ctx, k, keys) {
		rel := path.Dir(keys[i])
		switch {
		case a.err != nil:
			k.log.Warn("not a readable set-aside copy; left out of the index", "dir", k.abs(rel), "err", a.err)
		case asideRel(a.v.ID) != rel:
			k.log.Warn("aside.json names another id; left out of the index", "dir", k.abs(rel))
		default:
			out = append(out, a.v)
		}
	}
	return out, nil
}

// recordReaders bounds the records readRecords reads at once: a store over
// a network (S3, an object store) answers each in a round trip, and a
// directory of 10,000 points took 0.8 s read one by one.
const recordReaders = 8

// record is one record readRecords read, or why it could not.
type record[T any] struct {
	v   *T
	err error
}

// readRecords reads the JSON record at each key, recordReaders at a time,
// and returns them in the order of keys.
func readRecords[T any](ctx context.Context, k *Keeper, keys []string) []record[T] {
	out := make([]record[T], len(keys))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(recordReaders, len(keys)) {
		wg.Go(func() {
			for i := range next {
				v := new(T)
				if err := k.getJSON(ctx, keys[i], v); err != nil {
					out[i].err = err
				} else {
					out[i].v = v
				}
			}
		})
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
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
