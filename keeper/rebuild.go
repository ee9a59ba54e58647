package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Rebuild brings the index's point.* and aside.* records in line with the
// files, which are the truth: every complete point and aside on disk is
// recorded, and every record without its directory is removed. Plans are
// left alone. It returns how many records it wrote and removed.
func (k *Keeper) Rebuild(ctx context.Context) (written, removed int, err error) {
	k.files.Lock()
	defer k.files.Unlock()
	want := map[string][]byte{}
	points, err := k.scanPoints()
	if err != nil {
		return 0, 0, err
	}
	for _, p := range points {
		data, _ := json.Marshal(p)
		want[pointKey(p.Module, p.Local, p.Form, p.Fingerprint)] = data
	}
	asides, err := k.scanAsides()
	if err != nil {
		return 0, 0, err
	}
	for _, a := range asides {
		data, _ := json.Marshal(a)
		want[asideKey(a.ID)] = data
	}
	for _, prefix := range []string{"point.", "aside."} {
		keys, err := k.index.Keys(ctx, prefix)
		if err != nil {
			return written, removed, errorf(ErrFailed, "listing the index: %w", err)
		}
		for _, key := range keys {
			if _, ok := want[key]; ok {
				continue
			}
			if err := k.index.Delete(ctx, key); err != nil {
				return written, removed, errorf(ErrFailed, "removing stale index record %s: %w", key, err)
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
			return written, removed, errorf(ErrFailed, "writing index record %s: %w", key, err)
		}
		written++
	}
	if written+removed > 0 {
		k.log.Info("index rebuilt from the files", "written", written, "removed", removed)
	}
	return written, removed, nil
}

// scanPoints reads every complete point directory's point.json.
func (k *Keeper) scanPoints() ([]*Point, error) {
	var out []*Point
	modules, err := readDirs(k.abs(pointsDir))
	if err != nil {
		return nil, err
	}
	for _, m := range modules {
		locals, err := readDirs(filepath.Join(k.abs(pointsDir), m))
		if err != nil {
			return nil, err
		}
		for _, l := range locals {
			dirs, err := readDirs(filepath.Join(k.abs(pointsDir), m, l))
			if err != nil {
				return nil, err
			}
			for _, d := range dirs {
				rel := filepath.Join(pointsDir, m, l, d)
				var p Point
				if err := readJSON(filepath.Join(k.abs(rel), pointFile), &p); err != nil {
					k.log.Warn("not a readable restore point; left out of the index", "dir", k.abs(rel), "err", err)
					continue
				}
				if pointRel(p.Module, p.Local, p.Form, p.Fingerprint) != rel {
					k.log.Warn("point.json names another place; left out of the index", "dir", k.abs(rel))
					continue
				}
				out = append(out, &p)
			}
		}
	}
	return out, nil
}

func (k *Keeper) scanAsides() ([]*Aside, error) {
	var out []*Aside
	ids, err := readDirs(k.abs(asideDir))
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		var a Aside
		if err := readJSON(filepath.Join(k.abs(asideRel(id)), asideFile), &a); err != nil {
			k.log.Warn("not a readable set-aside copy; left out of the index", "dir", k.abs(asideRel(id)), "err", err)
			continue
		}
		if a.ID != id {
			k.log.Warn("aside.json names another id; left out of the index", "dir", k.abs(asideRel(id)))
			continue
		}
		out = append(out, &a)
	}
	return out, nil
}

// readDirs lists the real (not symlinked), complete subdirectories of dir.
func readDirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && e.Type()&fs.ModeSymlink == 0 && !strings.HasSuffix(e.Name(), partialSuffix) &&
			!strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
