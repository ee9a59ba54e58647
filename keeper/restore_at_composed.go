package keeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper/archives"
	"github.com/nats-keeper/nats-keeper/keeper/spool"
	"github.com/nats-keeper/nats-keeper/store"
)

// A restore to a moment whose point is not made yet, beside the set-aside
// of the live data (restore_at_beside.go), does not write that point into
// the store: it composes the moment's archive once, checked as it is
// written (as the moment's point's write is), into a store that keeps all
// of it but its streams' data (spool.Recomposed: tar headers, backup.json
// files, the manifest), and then composes each stream's data again, from
// the same base and segments, as the restore reads it for the server; that
// read is held to the CRC-32C of the first composition, so the server is
// sent the very bytes that were checked, or the restore fails and the
// aside is put back. The base is read twice, the second time checked
// against the CRC-32C of the first read. The store takes the aside only,
// as for a full restore, instead of the aside and a second archive of the
// same size (on a remote store, its upload and download); nothing of the
// composition is written anywhere.
//
// What must outlive a crash is the moment itself: the journal names the
// moment's point (where it would be made) and the moment (journalMoment).
// A keeper that takes the restore up and finds no point there makes it
// then, from the same base and segments (remakeMoment), durably, before
// it goes on; where it cannot, it puts the aside back, as for any point
// gone. A keeper configured not to compose (Config.ComposeMoments:
// ComposeNever) writes the moment's point into the store first, as a dry
// run, method logical and a restore into absent kept data always do.

// ComposeMode is whether a restore to a moment composes the moment's
// archive or writes its point (Config.ComposeMoments).
type ComposeMode int

const (
	// ComposeAuto composes the archive of a moment restored over live
	// data with a plan known before it is written (restore_at_beside.go).
	ComposeAuto ComposeMode = iota
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

// composeMoment composes the archive of the moment pm, checked as it is
// written, into a store that keeps all of it but its streams' data
// (spool.Recomposed), and opens it there: a madePoint whose record is not
// stored (composed). Each stream's data is composed again, from the same
// base and segments, as the restore reads it for the server; the read
// checks it against the CRC-32C of the first composition. Its caller closes
// it (closeComposed).
func (k *Keeper) composeMoment(ctx context.Context, r Request, pm *plannedMoment) (_ *madePoint, err error) {
	base, pl := pm.base, pm.plan
	rel := pointRel(r.Module, r.Local, pm.ch.form, pm.fp)
	// The base stays open for the second composition: its data, read whole
	// and found matching its manifest by the first, is then checked against
	// the CRC-32C of that read rather than hashed again.
	bases, err := k.openArchive(ctx, base.Dir, base)
	if err != nil {
		return nil, fmt.Errorf("composing the archive of the moment: opening the base %s: %w, so nothing was set aside or removed", base.Dir, err)
	}
	var order []string // each data entry's stream, in the order written
	sc := spool.NewRecomposed(func(ctx context.Context, entry int, w io.Writer) error {
		if entry >= len(order) || pl.streams[order[entry]] == nil {
			return fmt.Errorf("the composed archive holds no data entry %d of the moment's streams", entry)
		}
		return k.writeMomentStream(ctx, pl, pl.streams[order[entry]], bases, w, io.Discard)
	})
	defer func() {
		if err != nil {
			sc.Close()
			bases.Close()
		}
	}()
	m, w, made, err := k.writeMomentArchive(ctx, sc, false, r, base, bases, pl, rel, func(err error) error {
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
	for _, ms := range m.Streams {
		order = append(order, ms.Name)
	}
	if n := sc.DataEntries(); n != len(order) {
		return nil, fmt.Errorf("composing the archive of the moment: it holds %d data entries for %d streams, so nothing was set aside or removed", n, len(order))
	}
	p := k.pointRecord(momentRequest(r, pm.ch, base, pm.fp), rel, m, slices.Clone(pl.positions))
	at := pl.at
	p.At, p.Base, p.ArchiveSize, p.ArchiveSum = &at, base.Dir, info.Size, info.Sum
	a, err := archives.Open(ctx, sc, rel, p, k.abs(rel)+" (composed)", nil)
	if err != nil {
		return nil, fmt.Errorf("opening the composed archive of the moment: %w, so nothing was set aside or removed", err)
	}
	made.Point, made.arch, made.recomposed, made.bases, made.moment = p, a, sc, bases, momentOf(pm, p)
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
	if made != nil && made.recomposed != nil {
		made.arch.Close()
		made.recomposed.Close()
		made.bases.Close()
		made.arch, made.recomposed, made.bases = nil, nil, nil
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
