package keeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper/archives"
	"github.com/nats-keeper/nats-keeper/keeper/spool"
	"github.com/nats-keeper/nats-keeper/store"
)

// A restore to a moment whose point is not made yet, beside the set-aside
// of the live data (restore_at_beside.go), does not write that point into
// the store: it composes the moment's archive into a scratch store, an
// unlinked file of the keeper's spool directory written through the page
// cache and never synced (spool.Scratch), checks it as it is written (as
// the moment's point's write does), and restores from it. The store's disk
// then takes the aside only, as for a full restore, instead of the aside
// and a second archive of the same size; nothing of the composition is
// left once the restore ends, or after a crash.
//
// What must outlive a crash is the moment itself: the journal names the
// moment's point (where it would be made) and the moment (journalMoment).
// A keeper that takes the restore up and finds no point there makes it
// then, from the same base and segments (remakeMoment), durably, before
// it goes on; where it cannot, it puts the aside back, as for any point
// gone. A keeper without a spool directory, or one that does not compose
// (Config.ComposeMoments: by default, one on a local file store), writes the
// moment's point into the store first, as before.

// ComposeMode is where a restore to a moment puts the moment's archive
// (Config.ComposeMoments).
type ComposeMode int

const (
	// ComposeAuto composes where the store is not a local file store.
	ComposeAuto ComposeMode = iota
	// ComposeAlways composes wherever the keeper has a spool directory.
	ComposeAlways
	// ComposeNever writes the moment's point into the store.
	ComposeNever
)

// journalMoment is the moment a restore composed rather than stored: what
// makes its point again from the capture.
type journalMoment struct {
	At   *time.Time        `json:"at,omitempty"`     // a moment in time
	Seq  map[string]uint64 `json:"at-seq,omitempty"` // or per stream the last sequence
	Base string            `json:"base"`             // the base point of its chain
	// Streams is what each stream of the archive composed held: the point
	// made again must hold the same (sameMoment).
	Streams []StreamSum `json:"streams,omitempty"`
}

// errMomentDiffers is a moment's point made again that does not hold the
// data the interrupted restore composed.
var errMomentDiffers = errors.New("the point of the moment made again does not hold the data the interrupted restore composed")

// momentOf is the journal's record of the moment pm, composed as p.
func momentOf(pm *plannedMoment, p *Point) *journalMoment {
	jm := &journalMoment{Base: pm.ch.base, Streams: p.Streams}
	if pm.mo.seq != nil {
		jm.Seq = pm.mo.seq
	} else {
		at := pm.mo.at
		jm.At = &at
	}
	return jm
}

// composeMoment composes the archive of the moment pm into a scratch
// store, checked as it is written, and opens it: a madePoint whose record
// is not stored (composed). Its caller closes it (closeComposed).
func (k *Keeper) composeMoment(ctx context.Context, r Request, pm *plannedMoment) (_ *madePoint, err error) {
	base, pl := pm.base, pm.plan
	rel := pointRel(r.Module, r.Local, pm.ch.form, pm.fp)
	sc := spool.NewScratch(k.spoolDir)
	defer func() {
		if err != nil {
			sc.Close()
		}
	}()
	m, w, made, err := k.writeMomentArchive(ctx, sc, false, r, base, pl, rel, func(err error) error {
		return fmt.Errorf("composing the archive of the moment: %w, so nothing was set aside or removed", err)
	})
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	info, err := w.Commit(ctx)
	if err != nil {
		return nil, fmt.Errorf("composing the archive of the moment: %w, so nothing was set aside or removed", err)
	}
	p := k.pointRecord(momentRequest(r, pm.ch, base, pm.fp), rel, m, slices.Clone(pl.positions))
	at := pl.at
	p.At, p.Base, p.ArchiveSize, p.ArchiveSum = &at, base.Dir, info.Size, info.Sum
	a, err := archives.Open(ctx, sc, rel, p, k.abs(rel)+" (composed)", nil)
	if err != nil {
		return nil, fmt.Errorf("opening the composed archive of the moment: %w, so nothing was set aside or removed", err)
	}
	made.Point, made.arch, made.scratch, made.moment = p, a, sc, momentOf(pm, p)
	return made, nil
}

// momentGone reports whether err, of making a composed moment's point
// again, says it cannot be made (its base or a segment gone or damaged, the
// moment out of the window), not that it could not be made now.
func momentGone(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrDamaged) || errors.Is(err, store.ErrNotFound)
}

// sameMoment checks that p, the moment's point made again, holds what jm
// recorded as composed: each stream's messages, bytes, sequences and
// consumers.
func sameMoment(jm *journalMoment, p *Point) error {
	if jm.Streams == nil {
		return nil
	}
	same := func(a, b StreamSum) bool {
		return a.Name == b.Name && a.Messages == b.Messages && a.Bytes == b.Bytes && a.FirstSeq == b.FirstSeq && a.LastSeq == b.LastSeq && a.Consumers == b.Consumers
	}
	if !slices.EqualFunc(p.Streams, jm.Streams, same) {
		return fmt.Errorf("%w (its streams %+v, composed %+v)", errMomentDiffers, p.Streams, jm.Streams)
	}
	return nil
}

// closeComposed drops the composed archive of made, if it is one.
func (made *madePoint) closeComposed() {
	if made != nil && made.scratch != nil {
		made.arch.Close()
		made.scratch.Close()
		made.arch, made.scratch = nil, nil
	}
}

// composed reports whether made's archive was composed, not stored.
func (made *madePoint) composed() bool { return made != nil && made.arch != nil }

// remakeMoment makes, durably, the point of the moment a journal's restore
// composed (j.Moment) and did not store, from the same base and segments,
// so that a keeper taking the restore up can carry it on. It holds the
// kept data's lease.
func (k *Keeper) remakeMoment(ctx context.Context, j *journal) (*Point, error) {
	jm := j.Moment
	mo := momentAt{seq: jm.Seq, base: jm.Base}
	if jm.At != nil {
		mo.at, mo.label = *jm.At, jm.At.Format(time.RFC3339Nano)
	} else {
		mo.label = "the sequences the journal names"
	}
	r := Request{Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why}
	pm, err := k.planMomentOf(ctx, r, mo)
	if err != nil {
		return nil, err
	}
	if rel := pointRel(j.Module, j.Local, pm.ch.form, pm.fp); rel != j.Point {
		return nil, fmt.Errorf("the moment planned again is %s, not %s as the journal names", rel, j.Point)
	}
	k.log.Warn("making the point of the moment an interrupted restore composed, from its base and segments", "module", j.Module, "local", j.Local,
		"point", j.Point, "base", jm.Base)
	made, err := k.writeMomentLocked(ctx, r, pm.ch, pm.base, pm.plan, pm.fp)
	if err != nil {
		return nil, err
	}
	return made.Point, nil
}
