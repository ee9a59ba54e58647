package keeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-keeper/nats-keeper/store"
)

// DiscardAside removes one set-aside copy (r.From is its id) on a person's
// call. The hand act is recorded first; if it cannot be recorded, nothing is
// removed. Then its objects and aside.<id> are removed.
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
	if k.hasJournal(ctx, id) {
		return nil, Errorf(ErrConflict, "set-aside copy %s belongs to a restore that has not finished; a keeper start finishes it, so nothing was removed", id)
	}
	if k.restoringFrom(ctx, rel) {
		return nil, Errorf(ErrConflict, "set-aside copy %s is being put back by a restore that has not finished; the keeper finishes it first, so nothing was removed", id)
	}
	var a Aside
	if err := k.getJSON(ctx, recordKey(rel), &a); errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(ErrNotFound, "there is no set-aside copy %s, so nothing was removed", id)
	} else if err != nil {
		k.log.Warn("aside.json unreadable; discarding by id", "id", id, "err", err)
	}

	act := Act{Verb: VerbDiscard, Module: module, Local: local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why, Hand: true,
		What: fmt.Sprintf("discard set-aside copy %s in %s", id, k.abs(rel)), Outcome: "intent"}
	if err := k.recordNow(ctx, act); err != nil {
		return nil, Errorf(ErrFailed, "the hand act to discard %s could not be recorded (%v), so nothing was removed", id, err)
	}
	// The record goes first, so that a crash mid-removal leaves only
	// leftovers, which the next start sweeps, never a half-deleted aside.
	if err := k.removePrefix(ctx, rel); err != nil {
		return nil, Errorf(ErrFailed, "set-aside copy %s was only partly removed (%v); what is left is no aside any more and goes at the next start", id, err)
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

// restoringFrom reports whether an unfinished restore (a journal in the
// index) restores from rel.
func (k *Keeper) restoringFrom(ctx context.Context, rel string) bool {
	js, _, _ := k.journals(ctx)
	for _, j := range js {
		if j.Point == rel {
			return true
		}
	}
	return false
}
