package transfer

import (
	"context"
	"errors"
	"io"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// momentOf finds, in st, the point of the moment of the incremental point
// rec (where names it for sentences): its archive is the one export and
// copy read, once a keeper made it (f<form>-at-<moment>, by a restore of
// it, a dry run too). A point not made yet is refused (kept.ErrNotFound) with
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
			"(a restore-kept of it, a dry run too, makes it)", where, st.Describe().URL+"/"+mrel)
	}
	if err != nil {
		return "", nil, kept.Errorf(kept.ErrFailed, "%s is an incremental point and the record of the point of its moment, %s, does not read (%v)",
			where, st.Describe().URL+"/"+mrel, err)
	}
	return mrel, mrec, nil
}

// Composer composes the archive of the incremental point rec from its base
// and capture segments in st, read from the store alone
// (keeper.ComposeMoment): export and copy take one for an incremental
// point whose moment's point no keeper has made.
type Composer func(ctx context.Context, st store.Store, rec *kept.Point) (ComposedArchive, error)

// ComposedArchive is the archive of an incremental point composed as it
// is written out (keeper.ComposedMoment).
type ComposedArchive interface {
	// Streams are its streams' names.
	Streams() []string
	// Compose writes one stream's stream.arc.s2 and backup.json.
	Compose(ctx context.Context, stream string, data, meta io.Writer) error
	// WritePoint writes it as a full point's archive at rel in st,
	// checked as it is written, and returns that point's record, not
	// written.
	WritePoint(ctx context.Context, st store.Store, rel string) (*kept.Point, error)
	// Said says what it is made of.
	Said() string
	Close() error
}
