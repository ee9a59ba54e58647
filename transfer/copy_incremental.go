package transfer

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// An incremental point (point.json: incremental, base, through, at) has no
// archive of its own: it is its base plus the capture's segments, and a
// keeper makes the point of its moment (f<form>-at-<moment>) from them when
// a verb reads it. The target has no capture chain, so copy carries it as a
// full point at its own place: the moment's point's archive and key
// indexes, under a record that is the moment point's (its archive's size
// and checksum, its streams and positions, its sealing) with the
// incremental point's names, taking, caller, why, catch-up, keep-until and
// moment, and no incremental, base or through. Its moment's point not made
// yet is refused, as export refuses it.

// incrementalCopy is the copy of the incremental point rec at rel in from.
func incrementalCopy(ctx context.Context, from, to store.Store, rel string, rec *kept.Point) (*aCopy, error) {
	if layout.IsAsideRel(rel) {
		return nil, fmt.Errorf("it is the aside of an incremental point (its base and capture segments), which copy does not carry")
	}
	mrel, mrec, err := momentOf(ctx, from, rec, from.Describe().URL+"/"+rel)
	if err != nil {
		return nil, fmt.Errorf("%w, so it was not copied", err)
	}
	full := asFullPoint(rec, mrec, rel)
	raw, err := layout.RecordJSON(full)
	if err != nil {
		return nil, fmt.Errorf("its record as a full point does not encode: %w", err)
	}
	return &aCopy{from: from, to: to, src: mrel, rel: rel, raw: raw, rec: full}, nil
}

// asFullPoint is the record of the incremental point inc at rel as a full
// point whose archive is that of m, the point of its moment.
func asFullPoint(inc, m *kept.Point, rel string) *kept.Point {
	p := *m
	p.Module, p.Local, p.Form, p.Fingerprint, p.Dir = inc.Module, inc.Local, inc.Form, inc.Fingerprint, rel
	p.Taken, p.Caller, p.Why, p.CatchUp, p.KeepUntil, p.At = inc.Taken, inc.Caller, inc.Why, inc.CatchUp, inc.KeepUntil, inc.At
	p.Incremental, p.Base, p.Through = false, "", 0
	return &p
}
