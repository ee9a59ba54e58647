package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

func asideKey(id string) string { return "aside." + id }

// newAsideID is <module>.<local>.<UTC yyyymmddThhmmss>, made unique if taken.
func (k *Keeper) newAsideID(module, local string) string {
	base := module + "." + local + "." + k.now().UTC().Format("20060102T150405")
	for n := 1; ; n++ {
		id := base
		if n > 1 {
			id = base + "-" + strconv.Itoa(n)
		}
		_, err1 := os.Lstat(k.abs(asideRel(id)))
		_, err2 := os.Lstat(k.abs(asideRel(id)) + partialSuffix)
		if errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist) {
			return id
		}
	}
}

// setAside snapshots the live streams into a new aside, verifies it, renames
// it into place, records it, and checks that no stream took a new message
// meanwhile. Only when it returns nil may the live streams be removed. On
// error, nothing was removed and no partial aside is left.
func (k *Keeper) setAside(ctx context.Context, r Request, pl *restorePlan) (*Aside, error) {
	id := k.newAsideID(r.Module, r.Local)
	rel := asideRel(id)
	partial := k.abs(rel) + partialSuffix
	if err := os.Mkdir(partial, 0o700); err != nil {
		return nil, err
	}
	placed := false
	defer func() {
		if !placed {
			os.RemoveAll(partial)
		}
	}()
	positions, err := k.positions(ctx, r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	m, size, err := k.writeArchive(ctx, partial, pl.SetAside,
		Progress{Verb: VerbRestore, Module: r.Module, Local: r.Local, Step: "aside"})
	if err != nil {
		return nil, err
	}
	reason := "restore"
	if r.AsideOnly {
		reason = "aside-only"
	}
	a := &Aside{ID: id, Module: r.Module, Local: r.Local, Taken: k.now().UTC(), Caller: r.Caller, Why: r.Why,
		Reason: reason, Dir: rel, Streams: streamSums(m), Positions: positions, ArchiveSize: size}
	if pl.point != nil {
		a.Point = pl.pointRel
	}
	if a.Positions == nil {
		a.Positions = []Position{}
	}
	if err := writeJSONDurable(filepath.Join(partial, asideFile), a); err != nil {
		return nil, fmt.Errorf("writing aside.json: %w", err)
	}
	if _, _, err := verifyArchive(ctx, partial); err != nil {
		return nil, fmt.Errorf("the set-aside copy does not verify: %w", err)
	}
	// Anything written to the live streams after their snapshot began is not
	// in the aside: removing them now would lose it.
	for _, s := range m.Streams {
		si, err := k.bus.Stream(ctx, s.Name)
		if err != nil {
			return nil, fmt.Errorf("looking up stream %s after setting it aside: %w", s.Name, err)
		}
		if si.LastSeq != s.State.LastSeq {
			return nil, errorf(ErrConflict, "stream %s took new messages while it was being set aside (last sequence %d, now %d); "+
				"stop the module's writers and try again", s.Name, s.State.LastSeq, si.LastSeq)
		}
	}
	if err := os.Rename(partial, k.abs(rel)); err != nil {
		return nil, err
	}
	placed = true
	if err := syncDir(filepath.Dir(k.abs(rel))); err != nil {
		return nil, err
	}
	data, _ := json.Marshal(a)
	if err := k.index.Put(ctx, asideKey(id), data); err != nil {
		return nil, fmt.Errorf("the set-aside copy is complete in %s but could not be recorded in the index: %w",
			k.abs(rel), err)
	}
	return a, nil
}
