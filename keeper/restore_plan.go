package keeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

// restorePlan is a RestorePlan with what executing it needs.
type restorePlan struct {
	RestorePlan
	point    *Point
	pointRel string
	arch     *openedArchive // the point's archive, opened once; nil for aside-only
	// moment is set when the point is a moment's archive composed, not
	// stored (restore_at_composed.go): the journal names it.
	moment   *journalMoment
	manifest *busarchive.Manifest
	live     []StreamInfo // what will be set aside and removed
	// verified is the point's verification before anything is removed
	// (nil when none of the kept data is live: the restore checks it as it
	// reads it), made from verifyBegan to verifyEnded. verifyLater: it is
	// still to be made, beside the set-aside (verifyBeside).
	verified                 *busarchive.Report
	verifyBegan, verifyEnded time.Time
	verifyLater              bool
	// asWritten: verified is the verification made as this very request
	// wrote the point (a moment's, restore_at_check.go), not a read of it.
	asWritten bool
	// expect is what each consumer set back must be once the restore is
	// done (expectConsumer).
	expect []ConsumerFigures
	// changes is, per stream of the point, what the live data changed
	// since it and the method the stream gets, and why (planMethods;
	// planAround adds what the restore means for the streams and
	// consumers around it). The reply's and the dry run's Streams.
	changes []kept.StreamChange
	// delta is, per stream the delta method rolls back, what it does
	// (planMethods): its tail is set aside, not the whole stream, and it
	// is not removed.
	delta []deltaStream
	// methodsSaid says each stream's method and why, for the dry run's
	// and the reply's sentence ("" when no stream of the point is live).
	methodsSaid string
	// logical is what a logical restore writes (planLogical); nil for
	// every other method.
	logical *logicalPlan
	// around is what the restore means around the kept data, in sentences
	// for the dry run's and the reply's said (planAround).
	around []string
}

// planRestore works out exactly what a restore-kept would do, touching
// nothing. The point's archive is opened (its manifest's seal and its layout
// checked) and, for a dry run, verified whole here. When any of the kept
// data is live, the whole verification is left to be made beside the
// set-aside (verifyLater), and the aside is committed, and anything
// removed, only once it passed: a point that fails verification sets
// nothing aside and removes nothing.
//
// When none of the kept data is live, nothing is at risk, and the whole
// verification is not made twice: the restore verifies each stream's data
// while it reads it for the server, and withholds its end until it verified
// (restoreArchive). A point that fails then leaves nothing behind: the
// restore removes what it began. That saves a whole read of the point, and
// the bytes sent are the very bytes verified.
//
// A point this very request wrote and verified as it wrote it (made, a
// moment's; nil otherwise) is not read whole again: that verification is
// the plan's (takeWritten).
func (k *Keeper) planRestore(ctx context.Context, r Request, made *madePoint) (*restorePlan, error) {
	if m := kept.MethodOf(r); r.AsideOnly && m != kept.MethodAuto && m != kept.MethodFull {
		return nil, Errorf(ErrBadRequest, "method %s restores, and aside-only restores nothing", m)
	}
	pl := &restorePlan{RestorePlan: RestorePlan{AsideOnly: r.AsideOnly, Overrides: OverridesOf(r),
		SetAside: []string{}, Remove: []string{}, Restore: []string{}, Reposition: []Position{}, Moves: []Move{}}}
	live, looked, err := k.liveStreams(ctx, r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	if len(live) > 0 {
		if err := k.canReadOwn(); err != nil {
			return nil, err
		}
	}
	ok := false
	defer func() {
		if !ok {
			pl.close()
		}
	}()
	if !r.AsideOnly {
		if live, err = k.planPoint(ctx, r, pl, live, made); err != nil {
			return nil, err
		}
	} else if len(live) == 0 {
		return nil, Errorf(ErrNotFound, "no kept data %s/%s on the bus%s to set aside (looked for %s)", r.Module, r.Local, k.busDomain(), strings.Join(looked, ", "))
	}
	switch {
	case r.AsideOnly:
	case pl.takeWritten(made):
	case len(live) == 0 && !r.DryRun:
	case r.DryRun:
		if err := k.verifyPoint(ctx, r, pl); err != nil {
			return nil, err
		}
	default:
		// Verified beside the set-aside, before anything is removed
		// (verifyBeside).
		pl.verifyLater = true
	}
	pl.live = live
	if !r.AsideOnly {
		if err := k.checkOverlaps(ctx, pl); err != nil {
			return nil, err
		}
	}
	for _, s := range live {
		pl.SetAside = append(pl.SetAside, s.Name)
		if ds := pl.deltaOf(s.Name); ds != nil {
			pl.AsideBytes += tailBytes(s, ds) // only its tail; it stays
			continue
		}
		pl.Remove = append(pl.Remove, s.Name)
		pl.AsideBytes += s.Bytes
	}
	if len(pl.delta) > 0 && len(pl.Restore) == 0 && !r.DryRun {
		// Nothing is restored from the point: it is not read (the delta
		// removes only the tail, which the aside holds, verified).
		pl.verifyLater = false
	}
	ok = true
	return pl, nil
}

// tailBytes is about how many bytes the tail of the live stream s holds.
func tailBytes(s StreamInfo, ds *deltaStream) uint64 {
	if s.Bytes > ds.PointBytes {
		return s.Bytes - ds.PointBytes
	}
	return 0
}

// canReadOwn refuses, with ErrLocked, a keeper that encrypts what it writes
// (Config.Seal) but holds no identity (Config.Unseal) to read it back: a
// set-aside copy is verified whole from the store before any live stream
// is removed, so such a keeper cannot set data aside.
func (k *Keeper) canReadOwn() error {
	if k.seal != nil && !k.unseal.Holds() {
		return Errorf(ErrLocked, "this keeper encrypts what it writes (--encrypt-to) but has no --identity to read a set-aside copy back and verify it before the live data is removed")
	}
	return nil
}

// planPoint works out the point's side of a restore: locates the point,
// opens its archive into the plan (checked against its record), checks its
// streams fit here, and plans the positions set back. It returns live with
// the streams the point carries that are on the bus outside the kept data's
// current streams: they would block its restore, so they are set aside too.
func (k *Keeper) planPoint(ctx context.Context, r Request, pl *restorePlan, live []StreamInfo, made *madePoint) ([]StreamInfo, error) {
	p, rel, a, err := k.openPoint(ctx, r, made)
	if err != nil {
		return nil, err
	}
	pl.arch = a
	m := a.Manifest()
	if got, want := m.StreamNames(), kept.StreamSumNames(p.Streams); strings.Join(got, ",") != strings.Join(want, ",") {
		return nil, Errorf(ErrDamaged, "%s: its record names streams %v but its archive holds %v", sourceName(p), want, got)
	}
	pl.point, pl.pointRel, pl.manifest = p, rel, m
	if made.composed() {
		pl.moment = made.moment
	}
	pl.Point = k.abs(rel)
	pl.Restore = m.StreamNames()
	pl.RestoreBytes = uint64(m.Bytes())
	if err := k.checkReplicasFit(a, pl.Restore, pl.Overrides); err != nil {
		return nil, fmt.Errorf("%s cannot be restored here: %w", sourceName(p), err)
	}
	// A stream the point carries that lives on the bus outside the kept
	// data's current streams would block its restore: it is set aside too.
	for _, s := range pl.Restore {
		if containsStream(live, s) {
			continue
		}
		si, err := k.bus.Stream(ctx, s)
		switch {
		case errors.Is(err, ErrNoStream):
		case err != nil:
			return nil, Errorf(ErrFailed, "looking up stream %s: %v", s, err)
		default:
			live = append(live, *si)
		}
	}
	// The method of each stream (planMethods): a delta stream is not
	// removed, so its consumers are set back on it as it stays.
	pl.live = live
	if err := k.planMethods(ctx, r, pl); err != nil {
		return nil, err
	}
	removed := []StreamInfo{}
	for _, s := range live {
		if pl.deltaOf(s.Name) == nil {
			removed = append(removed, s)
		}
	}
	if err := k.planPositions(ctx, r, pl, removed); err != nil {
		return nil, err
	}
	return live, nil
}

// openPoint locates the point r names and opens its archive, or takes
// made's when it was composed and not stored (its moment then noted in pl
// by the caller).
func (k *Keeper) openPoint(ctx context.Context, r Request, made *madePoint) (*Point, string, *openedArchive, error) {
	if made.composed() {
		return made.Point, made.Dir, made.arch, nil
	}
	p, rel, err := k.locatePoint(ctx, r)
	if err != nil {
		return nil, "", nil, err
	}
	a, err := k.openArchive(ctx, rel, p)
	if errors.Is(err, ErrLocked) {
		return nil, "", nil, fmt.Errorf("%s cannot be read here: %w", sourceName(p), err)
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("%s is damaged: %w", sourceName(p), err)
	}
	return p, rel, a, nil
}

// verifyPoint verifies the plan's point whole, timed for the evidence.
func (k *Keeper) verifyPoint(ctx context.Context, r Request, pl *restorePlan) error {
	progressFrom(ctx)(Progress{Verb: VerbRestore, Module: r.Module, Local: r.Local, Step: "verify",
		StreamsTotal: len(pl.Restore), BytesTotal: pl.point.ArchiveSize})
	began := k.now()
	_, rep, err := k.verifyArchive(ctx, pl.arch)
	if err != nil {
		return fmt.Errorf("%s is damaged: %w", sourceName(pl.point), err)
	}
	pl.verified, pl.verifyBegan, pl.verifyEnded = rep, began, k.now()
	k.log.Debug("restore point verified", "module", r.Module, "local", r.Local, "point", sourceName(pl.point), "bytes", rep.Bytes, "took", pl.verifyEnded.Sub(began))
	return nil
}

// close closes the point's archive, if the plan opened one (a composed
// moment's belongs to its madePoint: closeComposed).
func (pl *restorePlan) close() {
	if pl.arch != nil && pl.moment == nil {
		pl.arch.Close()
	}
	pl.arch = nil
}

func containsStream(ss []StreamInfo, name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}
