package keeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/store"
)

// ComposedMoment is the archive of an incremental point composed from its
// base and capture segments as it is read, from the store alone: no bus,
// index or keeper is needed, and nothing is written to the store. export
// writes an incremental point out through it when no keeper has made the
// point of its moment yet, copy carries it into another store, and
// verify-kept checks it; each stream is composed by the very code a keeper
// writes that point with, so the two hold the same messages, consumers
// and backup.json (the archive's entries carry the time they were
// written).
type ComposedMoment struct {
	v       *storeView
	version string
	point   *Point // the incremental point
	plan    *momentPlan
	bases   *openedArchive
	names   []string
	said    string
	sealed  bool // the base is encrypted
}

// ComposeConfig is where ComposeMoment reads and who it says wrote what
// it writes.
type ComposeConfig struct {
	Store store.Store // the store holding the point, its base and its chain
	// Unseal opens a sealed base and segments; nil opens plain ones only
	// (a sealed one is refused, ErrLocked).
	Unseal  *agecrypt.Opener
	Log     *slog.Logger // nil: slog.Default()
	Version string       // recorded as the writer of a point WritePoint writes
}

// ComposeMoment plans the archive of the incremental point p in
// cfg.Store: the chain of its base, read from the store, and the base's
// and segments' messages its moment keeps. The caller must Close it.
func ComposeMoment(ctx context.Context, cfg ComposeConfig, p *Point) (*ComposedMoment, error) {
	if cfg.Store == nil {
		return nil, errors.New("keeper: ComposeMoment needs a Store")
	}
	if !p.Incremental || p.At == nil || p.Base == "" {
		return nil, Errorf(ErrBadRequest, "%s is not an incremental point naming its moment and base", pointName(p))
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	v := &storeView{store: cfg.Store, unseal: cfg.Unseal, log: log}
	v.baseRecord = v.storeRecord
	chains, err := v.listChains(ctx, p.Module, p.Local)
	if err != nil {
		return nil, err
	}
	var ch *chain
	for _, c := range chains {
		if c.base == p.Base {
			ch = c
		}
	}
	if ch == nil {
		return nil, Errorf(ErrNotFound, "the capture chain of the base %s of %s is not in %s", p.Base, pointName(p), v.abs(""))
	}
	if err := v.readChain(ctx, ch); err != nil {
		return nil, err
	}
	if uint64(len(ch.segments)) < p.Through {
		return nil, Errorf(ErrFailed, "the chain of the base %s holds %d segment(s), fewer than the %d %s was taken on", p.Base, len(ch.segments), p.Through, pointName(p))
	}
	base, err := v.readBase(ctx, ch.base)
	if err != nil {
		return nil, fmt.Errorf("reading the base %s: %w", ch.base, err)
	}
	// The point's record says the capture held its moment when it was
	// taken (the keeper checked the chain's reach then): its moment ends
	// the window it is made in.
	mo := momentAt{at: *p.At, label: p.At.Format(time.RFC3339Nano), base: p.Base}
	plan, err := v.planMoment(ctx, ch, base, mo, *p.At)
	if err != nil {
		return nil, err
	}
	bases, err := v.openStored(ctx, base.Dir, base)
	if err != nil {
		return nil, fmt.Errorf("opening the base %s: %w", base.Dir, err)
	}
	cm := &ComposedMoment{v: v, version: cfg.Version, point: p, plan: plan, bases: bases, said: momentMadeSaid(ch, plan)}
	if base.Encrypted != nil {
		cm.sealed = true
		cm.said += " The base and the segments are encrypted at rest; they were decrypted with the identity given, so what is composed is plain data."
	}
	for _, s := range base.Streams {
		cm.names = append(cm.names, s.Name)
	}
	return cm, nil
}

// Streams are the names of the streams of the moment, in the base's order.
func (cm *ComposedMoment) Streams() []string { return cm.names }

// Said says what the archive is made of: the base, how many segments,
// and what the moment may lack (deletes no longer tracked, messages
// deleted before the capture read them).
func (cm *ComposedMoment) Said() string { return cm.said }

// Compose writes stream's archive (stream.arc.s2, NATSARC1) into data and
// its backup.json into meta, as the point of the moment holds them.
func (cm *ComposedMoment) Compose(ctx context.Context, stream string, data, meta io.Writer) error {
	ms := cm.plan.streams[stream]
	if ms == nil {
		return errors.New("stream " + stream + " is not in the moment's base")
	}
	return cm.v.writeMomentStream(ctx, cm.plan, ms, cm.bases, data, meta)
}

// WritePoint writes the moment as a full point's archive, rel/bus.tar in
// st (plain: a sealed base needs the identity to be read, and what is
// composed from it is not sealed again), every stream composed and checked
// as it is written as a keeper checks the point of a moment it makes, the
// archive committed only once that passed. It returns the record of that
// point, not written: the incremental point's names, taking, caller, why,
// catch-up, keep-until and moment, the archive's streams, size and
// checksum, and the positions of the moment; no incremental, base or
// through. The caller writes it, last. copy carries an incremental point
// into another store through it.
func (cm *ComposedMoment) WritePoint(ctx context.Context, st store.Store, rel string) (*Point, error) {
	if cm.sealed {
		return nil, Errorf(ErrLocked, "the base and segments of %s are encrypted, and a point composed of them is not written plain", pointName(cm.point))
	}
	sw, err := st.Create(ctx, archiveKey(rel))
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			sw.Abort()
		}
	}()
	w := busarchive.NewWriter(archiveFile{sw}, busarchive.WriterInfo{KeeperVersion: cm.version, ServerVersion: cm.bases.Manifest().ServerVersion, Created: time.Now().UTC()})
	checks := newMomentChecks(time.Now())
	defer checks.stop()
	if _, err := takeInTurn(ctx, w, cm.names, checks.source(cm.Compose), &Progress{}); err != nil {
		return nil, err
	}
	m, err := w.Commit()
	if err != nil {
		return nil, err
	}
	if _, _, problems := checks.report(m); len(problems) > 0 {
		return nil, fmt.Errorf("the archive was checked as it was written and %w, so it was not committed", damagedAsWritten(cm.v.abs(rel), problems))
	}
	info, err := sw.Commit(ctx)
	if err != nil {
		return nil, err
	}
	committed = true
	inc := cm.point
	at := *inc.At
	positions := slices.Clone(cm.plan.positions)
	return &Point{
		Module: inc.Module, Local: inc.Local, Form: inc.Form, Fingerprint: inc.Fingerprint, CatchUp: inc.CatchUp,
		Taken: inc.Taken, Caller: inc.Caller, Why: inc.Why, Dir: rel, KeepUntil: inc.KeepUntil, At: &at,
		Streams: streamSums(m), Positions: positions, PositionCount: len(positions),
		Format: RecordFormat, WrittenBy: cm.version, ArchiveSize: info.Size, ArchiveSum: info.Sum,
	}, nil
}

// Close closes the base's archive.
func (cm *ComposedMoment) Close() error { return cm.bases.Close() }

// momentMadeSaid says what the point of a moment planned as pl from ch is
// made of, and what it may lack.
func momentMadeSaid(ch *chain, pl *momentPlan) string { return momentFrom("made", ch, pl) }

// momentComposedSaid is momentMadeSaid of an archive composed, not made
// into a point.
func momentComposedSaid(ch *chain, pl *momentPlan) string { return momentFrom("composed", ch, pl) }

func momentFrom(how string, ch *chain, pl *momentPlan) string {
	said := fmt.Sprintf("%s from the base %s and %d segment(s).", how, ch.base, len(pl.segs))
	said += untrackedSaid(pl)
	if pl.unseen > 0 {
		said += fmt.Sprintf(" %d message(s) stored around the moment were deleted before the capture read them (a KV key or an object replaced faster than segment-every), so the moment may lack what they held.", pl.unseen)
	}
	return said
}
