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

// Reasons an aside was made (Aside.Reason).
const (
	ReasonRestore   = "restore"    // a restore replaced the live data
	ReasonAsideOnly = "aside-only" // an aside-only request removed it
	ReasonReplaced  = "replaced"   // a point taken again at the same form and fingerprint replaced this one
	ReasonRecovery  = "recovery"   // recovery found it on the bus under the kept data's names
)

// maxAsideTries bounds the ids tried for one aside: <base>, <base>-2, …
const maxAsideTries = 999

// newAside claims a new aside id, <module>.<local>.<UTC yyyymmddThhmmss>
// made unique with -N if taken, by making its .partial directory (0700).
// Only "exists" is retried, a bounded number of times.
func (k *Keeper) newAside(module, local string) (id, partial string, err error) {
	if err := k.mkdirs(asideDir); err != nil {
		return "", "", err
	}
	base := module + "." + local + "." + k.now().UTC().Format("20060102T150405")
	for n := 1; n <= maxAsideTries; n++ {
		id = base
		if n > 1 {
			id = base + "-" + strconv.Itoa(n)
		}
		if _, err := os.Lstat(k.abs(asideRel(id))); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("making set-aside copy %s: %w", id, err)
		}
		partial = k.abs(asideRel(id)) + partialSuffix
		err := os.Mkdir(partial, 0o700)
		if err == nil {
			return id, partial, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", "", fmt.Errorf("making set-aside copy %s: %w", id, err)
		}
	}
	return "", "", fmt.Errorf("making a set-aside copy: %s and %d more ids are all taken", base, maxAsideTries-1)
}

// setAside snapshots the plan's live streams into a new aside for restore r.
func (k *Keeper) setAside(ctx context.Context, r Request, pl *restorePlan) (*Aside, error) {
	reason := ReasonRestore
	if r.AsideOnly {
		reason = ReasonAsideOnly
	}
	return k.setAsideStreams(ctx, r, pl.SetAside, reason, pl.pointRel)
}

// setAsideStreams snapshots the live streams into a new aside, verifies it,
// renames it into place, records it, and checks that no stream took a new
// message meanwhile. Only when it returns nil may the live streams be
// removed. On error, nothing was removed and no partial aside is left.
func (k *Keeper) setAsideStreams(ctx context.Context, r Request, streams []string, reason, pointRel string) (*Aside, error) {
	id, partial, err := k.newAside(r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	rel := asideRel(id)
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
	var live []StreamInfo
	for _, s := range streams {
		if si, err := k.bus.Stream(ctx, s); err == nil {
			live = append(live, *si)
		}
	}
	m, size, err := k.writeArchive(ctx, partial, streams,
		Progress{Verb: VerbRestore, Module: r.Module, Local: r.Local, Step: "aside", BytesTotal: storedBytes(live)})
	if err != nil {
		return nil, err
	}
	a := &Aside{ID: id, Module: r.Module, Local: r.Local, Taken: k.now().UTC(), Caller: r.Caller, Why: r.Why,
		Reason: reason, Point: pointRel, Dir: rel, Streams: streamSums(m), Positions: positions, ArchiveSize: size}
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
	if err := k.recordAside(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// recordAside puts aside.<id> in the index.
func (k *Keeper) recordAside(ctx context.Context, a *Aside) error {
	data, _ := json.Marshal(a)
	if err := k.index.Put(ctx, asideKey(a.ID), data); err != nil {
		return fmt.Errorf("the set-aside copy is complete in %s but could not be recorded in the index: %w", k.abs(a.Dir), err)
	}
	return nil
}
