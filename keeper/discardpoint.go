package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-keeper/nats-keeper/store"
)

// DiscardPoint removes one restore point (module, local, form and
// fingerprint) on a person's call, whatever the retention policy says:
// prune-kept always keeps the newest point, so without it a stream once in
// a point could never move to another kept data's plan. It is refused
// (ErrConflict) while a restore needs the point: while another verb holds
// the kept data's lease (a restore of it among them), or while a restore
// journal, of any kept data, restores from it. The hand act is recorded
// first; if it cannot be recorded, nothing is removed. Then the point's
// objects (point.json first, so what a crash leaves is no point) and its
// index record are removed.
func (k *Keeper) DiscardPoint(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbDiscardPoint, r); err != nil {
		return nil, err
	}
	ctx, release, err := k.lock(ctx, VerbDiscardPoint, r)
	if err != nil {
		return nil, err
	}
	defer release()
	rel := pointRel(r.Module, r.Local, r.Form, r.Fingerprint)
	name := fmt.Sprintf("%s/%s f%d-%s", r.Module, r.Local, r.Form, r.Fingerprint)
	if err := k.pointNeeded(ctx, name, rel); err != nil {
		return nil, err
	}
	bases, err := k.tailBases(ctx, r.Module, r.Local)
	if err != nil {
		return nil, Errorf(ErrConflict, "discard-point refused: %v, so whether an aside needs restore point %s cannot be told, and nothing was removed", err, name)
	}
	if id, ok := bases[rel]; ok {
		return nil, Errorf(ErrConflict, "discard-point refused: aside %s holds the messages of a stream after restore point %s (a delta restore set only its tail aside), "+
			"and putting it back needs that point; discard that aside first if it is not wanted, so nothing was removed", id, name)
	}
	if why, err := k.captureNeed(ctx, r.Module, r.Local, rel); err != nil || why != "" {
		if err != nil {
			return nil, Errorf(ErrConflict, "discard-point refused: %v, so whether the capture needs restore point %s cannot be told, and nothing was removed", err, name)
		}
		return nil, Errorf(ErrConflict, "discard-point refused: restore point %s is kept because %s; turn capture off and let its window pass, or discard the incremental points first, so nothing was removed", name, why)
	}
	p, err := k.pointToDiscard(ctx, r, name, rel)
	if err != nil {
		return nil, err
	}
	act := Act{Verb: VerbDiscardPoint, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why, Hand: true,
		What: fmt.Sprintf("discard restore point %s in %s", name, k.abs(rel)), Outcome: "intent"}
	if err := k.recordNow(ctx, act); err != nil {
		return nil, Errorf(ErrFailed, "the hand act to discard restore point %s could not be recorded (%v), so nothing was removed", name, err)
	}
	// The act goes first and point.json first of the objects, so a crash
	// mid-removal leaves only leftovers that no record names, which the
	// next start sweeps, never a half-deleted point.
	if err := k.removePrefix(ctx, rel); err != nil {
		return nil, Errorf(ErrFailed, "restore point %s was only partly removed (%v); its point.json went first, so it is no point any more, "+
			"and what is left goes at a keeper's start", name, err)
	}
	said := fmt.Sprintf("Discarded restore point %s (%s) on %s's call: %s.", name, HumanBytes(p.ArchiveSize), who(r.Caller), r.Why)
	if err := k.index.Delete(ctx, pointKey(r.Module, r.Local, r.Form, r.Fingerprint)); err != nil {
		said += fmt.Sprintf(" Its index record could not be removed (%v); a restart rebuilds the index.", err)
	}
	act.Outcome, act.What = "done", said
	if err := k.record(ctx, act); err != nil {
		said += fmt.Sprintf(" (The act of completion could not be recorded: %v.)", err)
	}
	return &Reply{Said: said, Point: p, Dir: k.abs(rel)}, nil
}

// pointNeeded refuses (ErrConflict) to discard the point at rel while a
// restore journal restores from it, or while the journals cannot all be
// read (then it cannot be told).
func (k *Keeper) pointNeeded(ctx context.Context, name, rel string) error {
	js, unread, err := k.journals(ctx)
	if err == nil && len(unread) > 0 {
		err = unread[0].Err // a journal not read may restore from it
	}
	for _, j := range js {
		if j.Point == rel {
			return Errorf(ErrConflict, "discard-point refused: restore point %s is what the unfinished restore of %s/%s restores from; "+
				"the keeper finishes or undoes that restore first, so nothing was removed", name, j.Module, j.Local)
		}
	}
	if err != nil {
		return Errorf(ErrConflict, "discard-point refused: %v, so whether a restore needs restore point %s cannot be told, and nothing was removed", err, name)
	}
	return nil
}

// pointToDiscard reads the point at rel: its point.json, else its index
// record (a record whose point.json is gone is discarded too); ErrNotFound
// when neither is there.
func (k *Keeper) pointToDiscard(ctx context.Context, r Request, name, rel string) (*Point, error) {
	var p Point
	err := k.getJSON(ctx, recordKey(rel), &p)
	if err == nil {
		p.Positions = nil // the reply names the point; its positions are gone with it
		return &p, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		k.log.Warn("point.json unreadable; discarding by name", "point", name, "err", err)
	}
	data, ierr := k.index.Get(ctx, pointKey(r.Module, r.Local, r.Form, r.Fingerprint))
	switch {
	case ierr == nil:
		p = Point{Module: r.Module, Local: r.Local, Form: r.Form, Fingerprint: r.Fingerprint, Dir: rel}
		_ = json.Unmarshal(data, &p) // what it names, as far as it reads
		return &p, nil
	case errors.Is(ierr, ErrNotFound) && errors.Is(err, store.ErrNotFound):
		return nil, Errorf(ErrNotFound, "there is no restore point %s, so nothing was removed", name)
	case errors.Is(ierr, ErrNotFound):
		return &Point{Module: r.Module, Local: r.Local, Form: r.Form, Fingerprint: r.Fingerprint, Dir: rel}, nil
	}
	return nil, Errorf(ErrFailed, "reading the index record of restore point %s (%v), so nothing was removed", name, ierr)
}
