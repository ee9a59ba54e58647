package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DiscardAside removes one set-aside copy (r.From is its id) on a person's
// call. The hand act is recorded first; if it cannot be recorded, nothing is
// removed. Then the directory and aside.<id> are removed.
func (k *Keeper) DiscardAside(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbDiscard, r); err != nil {
		return nil, err
	}
	id := r.From
	module, local, _ := ParseAsideID(id)
	lr := r
	lr.Module, lr.Local = module, local
	ctx, release, err := k.lock(ctx, VerbDiscard, lr)
	if err != nil {
		return nil, err
	}
	defer release()

	rel := asideRel(id)
	if err := k.checkNoLinks(rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errorf(ErrNotFound, "there is no set-aside copy %s, so nothing was removed", id)
		}
		return nil, errorf(ErrBadRequest, "set-aside copy %s: %v, so nothing was removed", id, err)
	}
	if k.hasJournal(id) {
		return nil, errorf(ErrConflict, "set-aside copy %s belongs to a restore that has not finished; a keeper start finishes it, so nothing was removed", id)
	}
	if k.restoringFrom(ctx, rel) {
		return nil, errorf(ErrConflict, "set-aside copy %s is being put back by a restore that has not finished; the keeper finishes it first, so nothing was removed", id)
	}
	var a Aside
	if err := readJSON(filepath.Join(k.abs(rel), asideFile), &a); err != nil && !errors.Is(err, fs.ErrNotExist) {
		k.log.Warn("aside.json unreadable; discarding by id", "id", id, "err", err)
	}

	act := Act{Verb: VerbDiscard, Module: module, Local: local, Caller: r.Caller, Why: r.Why, Hand: true,
		What: fmt.Sprintf("discard set-aside copy %s in %s", id, k.abs(rel)), Outcome: "intent"}
	if err := k.record(ctx, act); err != nil {
		return nil, errorf(ErrFailed, "the hand act to discard %s could not be recorded (%v), so nothing was removed", id, err)
	}
	// Renamed first so that a crash mid-removal leaves a .partial directory,
	// which the next start removes, never a half-deleted aside under its id.
	doomed := k.abs(rel) + partialSuffix
	if err := os.Rename(k.abs(rel), doomed); err != nil {
		return nil, errorf(ErrFailed, "set-aside copy %s could not be moved for removal (%v), so nothing was removed", id, err)
	}
	if err := syncDir(k.abs(asideDir)); err != nil {
		k.log.Warn("sync aside directory", "err", err)
	}
	if err := os.RemoveAll(doomed); err != nil {
		return nil, errorf(ErrFailed, "set-aside copy %s was only partly removed (%v); the rest goes at the next start", id, err)
	}
	said := fmt.Sprintf("Discarded set-aside copy %s (%s) on %s's call: %s.", id, HumanBytes(a.ArchiveSize), who(r.Caller), r.Why)
	if err := k.index.Delete(ctx, asideKey(id)); err != nil {
		said += fmt.Sprintf(" Its index record could not be removed (%v); a restart rebuilds the index.", err)
	}
	act.Outcome, act.What = "done", said
	if err := k.record(ctx, act); err != nil {
		said += fmt.Sprintf(" (The act of completion could not be recorded: %v.)", err)
	}
	return &Reply{Said: said, Aside: &a}, nil
}

func who(caller string) string {
	if caller == "" {
		return "an unnamed caller"
	}
	return caller
}

// restoringFrom reports whether an unfinished restore (a journal on disk or
// in the index) restores from rel.
func (k *Keeper) restoringFrom(ctx context.Context, rel string) bool {
	matches, _ := filepath.Glob(filepath.Join(k.abs(asideDir), "*", journalFile))
	for _, m := range matches {
		var j journal
		if readJSON(m, &j) == nil && j.Point == rel {
			return true
		}
	}
	keys, _ := k.index.Keys(ctx, "journal.")
	for _, key := range keys {
		var j journal
		if data, err := k.index.Get(ctx, key); err == nil && json.Unmarshal(data, &j) == nil && j.Point == rel {
			return true
		}
	}
	return false
}
