package keeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A restore to a moment (restore-kept with at or at-seq) composes the
// archive of that moment from the capture, then restores it as any point:
// the newest base before the moment, plus its segments up to the moment,
// minus the deletes they recorded and what the streams' own limits had
// removed by then, written as one archive per stream
// (restore_at_stream.go). The archive is verified as it is written
// (restore_at_check.go), and the restore does not read it whole again; the
// live data is set aside (beside the archive's write, where the plan is
// known before it: restore_at_beside.go) and the archive restored by the
// usual path.
//
// A keeper restoring over live data (by default) composes the archive,
// and composes it again as it restores it, writing nothing of it; its
// journal names the moment, so
// a keeper taking the restore up makes the moment's point first
// (restore_at_composed.go). Otherwise the archive is written into a point
// of its own, points/<module>/<local>/f<form>-at-<moment>, which stays, so
// the same moment restores again without being made again (verified then
// beside the set-aside, as any point); prune-kept removes it as any point.

// momentAt is the moment a restore asks for.
type momentAt struct {
	at    time.Time         // at: a time (zero with at-seq)
	seq   map[string]uint64 // at-seq: per stream the last sequence
	label string            // for sentences
	base  string            // the base point of the chain to make it from ("": the newest before the moment)
}

// restoreAt is RestoreKept of a moment.
func (k *Keeper) restoreAt(ctx context.Context, r Request) (*Reply, error) {
	mo := momentAt{label: r.At}
	if r.At != "" {
		at, err := kept.ParseAt(r.At)
		if err != nil {
			return nil, err
		}
		mo.at = at
	} else {
		mo.seq = r.AtSeq
		var parts []string
		for s, n := range r.AtSeq {
			parts = append(parts, fmt.Sprintf("%s:%d", s, n))
		}
		slices.Sort(parts)
		mo.label = "sequences " + strings.Join(parts, ", ")
	}
	refused := func(err error) error {
		return fmt.Errorf("%s of %s/%s at %s refused: %w, so nothing was done", VerbRestore, r.Module, r.Local, mo.label, err)
	}
	pm, err := k.planMomentOf(ctx, r, mo)
	if err != nil {
		return nil, refused(err)
	}
	rr := r
	rr.At, rr.AtSeq = "", nil
	rep, err := k.restoreMoment(ctx, r, rr, pm)
	var notMade momentNotMade
	if errors.As(err, &notMade) {
		return nil, refused(notMade.err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s; %w", pm.said, err)
	}
	age := pm.plan.positionsAge
	ms := age.Milliseconds()
	rep.PositionsAgeMS = &ms
	said := pm.said
	if pm.composed {
		said = pm.composedSaid()
	}
	rep.Said = fmt.Sprintf("%s %s The consumer positions were sampled %s before the moment.", said, rep.Said, age.Round(time.Millisecond))
	return rep, nil
}
