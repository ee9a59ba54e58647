package transfer

import (
	"context"
	"errors"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// momentOf finds, in st, the point of the moment of the incremental point
// rec (where names it for sentences): its archive is the one export and
// copy read, once a keeper made it (f<form>-at-<moment>, by a verify-kept or
// a restore of it). A point not made yet is refused (kept.ErrNotFound) with
// a sentence naming it and how to make it; the caller says what was not
// done.
func momentOf(ctx context.Context, st store.Store, rec *kept.Point, where string) (string, *kept.Point, error) {
	if rec.At == nil || rec.Base == "" {
		return "", nil, kept.Errorf(kept.ErrFailed, "the incremental point %s names no moment or base", where)
	}
	mrel := layout.MomentRel(rec.Base, *rec.At)
	_, mrec, err := layout.ReadRecord(ctx, st, mrel)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil, kept.Errorf(kept.ErrNotFound, "%s is an incremental point (its base and capture segments) and the point of its moment, %s, is not made yet "+
			"(verify-kept of it makes it)", where, st.Describe().URL+"/"+mrel)
	}
	if err != nil {
		return "", nil, kept.Errorf(kept.ErrFailed, "%s is an incremental point and the record of the point of its moment, %s, does not read (%v)",
			where, st.Describe().URL+"/"+mrel, err)
	}
	return mrel, mrec, nil
}
