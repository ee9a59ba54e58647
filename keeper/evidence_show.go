package keeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/nats-keeper/nats-keeper/store"
)

// ShowEvidence reads back the evidence report of a restore: r.From names
// the aside the restore made (its id, or aside/<id>), or, for a restore
// into absent kept data, what it restored from (a point's directory,
// points/<module>/<local>/f<form>-<fingerprint>, or aside/<id>); without a
// from, the point of r.Module, r.Local, r.Form and r.Fingerprint. A point
// holds the report of the last restore into absent data made from it. It
// changes nothing.
func (k *Keeper) ShowEvidence(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbShowEvidence, r); err != nil {
		return nil, err
	}
	rel, err := k.evidenceFrom(r)
	if err != nil {
		return nil, fmt.Errorf("%s refused: %w, so nothing was read", VerbShowEvidence, err)
	}
	key := path.Join(rel, evidenceFile)
	data, err := k.readSmall(ctx, key, maxEvidenceSize)
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(ErrNotFound, "there is no evidence report at %s: a restore-kept writes one beside the aside it makes, or, "+
			"restoring into absent kept data, beside the point it restores from", k.abs(key))
	}
	if err != nil {
		return nil, Errorf(ErrFailed, "reading the evidence report %s failed: %w", k.abs(key), err)
	}
	ev, err := DecodeEvidence(data)
	if err != nil {
		return nil, Errorf(ErrFailed, "%s: %w", k.abs(key), err)
	}
	said := fmt.Sprintf("Evidence of the restore-kept of %s/%s (%s) that ended %s: %s.",
		ev.Module, ev.Local, ev.Kind, ev.Ended.Format("2006-01-02T15:04:05Z"), ev.Said)
	if !isAsideRel(rel) {
		// A point taken again at the same place is another point: say so.
		if p, err := k.readHead(ctx, rel); err == nil && p.ArchiveSum != "" && ev.PointSum != "" && p.ArchiveSum != ev.PointSum {
			said += " The point at this place was taken again since; this report is of the earlier one."
		}
	}
	return &Reply{Said: said, Evidence: ev, Dir: k.abs(rel)}, nil
}

// evidenceFrom is the key prefix a show-evidence request names.
func (k *Keeper) evidenceFrom(r Request) (string, error) {
	switch {
	case r.From == "":
		return pointRel(r.Module, r.Local, r.Form, r.Fingerprint), nil
	case !strings.Contains(r.From, "/"):
		if _, _, err := ParseAsideID(r.From); err != nil {
			return "", err
		}
		return asideRel(r.From), nil
	}
	return k.relFrom(r.From)
}
