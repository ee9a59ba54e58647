package keeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// The kind and the step of a logical restore's journal: the live values it
// overwrites are set aside (the journal's Aside), and each stream it has
// written is in Restored. A keeper that starts again finishes it: it finds
// again the keys of the aside that differ from the point, and writes them
// (restore_logical_recover.go).
const (
	KindLogical = "logical"
	StepLogical = "logical"
)

// logicalRun is the run of a logical restore: a restore run (its journal,
// evidence and ports) with what it writes.
type logicalRun struct {
	*restoreRun
	lp *logicalPlan
}

// restoreLogical is restoreLocked for a plan whose method is logical: set
// the live values it overwrites aside (verified), write the journal, write
// the point's value of each key that differs, set the positions on the
// other streams, then the evidence and the reply. began is when the
// restore began.
func (k *Keeper) restoreLogical(ctx context.Context, act Act, r Request, pl *restorePlan, began time.Time) (*Reply, error) {
	fail := func(err error) (*Reply, error) { return nil, k.restoreFailed(ctx, act, err) }
	if pl.logical == nil {
		return fail(Errorf(ErrConflict, "restore-kept of %s/%s: %s holds only the values a logical restore overwrote, so it puts back only with method logical; nothing was changed",
			r.Module, r.Local, pl.source()))
	}
	if r.DryRun {
		return k.logicalDryRun(ctx, act, r, pl)
	}
	asideBegan := k.now()
	aside, asideRep, err := k.setAsideLogical(ctx, r, pl)
	if err != nil {
		return fail(fmt.Errorf("restore-kept of %s/%s: setting the live values aside failed: %w, so nothing was written", r.Module, r.Local, withKind(ErrFailed, err)))
	}
	x, err := k.beginLogical(ctx, r, pl, aside, asideRep, began, asideBegan, !act.Hand)
	if err != nil {
		return fail(err)
	}
	set, err := x.execute(ctx)
	if err != nil {
		return fail(err)
	}
	defer x.journals.close(ctx, x.j)
	rep := k.logicalReply(r, pl, aside, set)
	ev, werr := x.finishEvidence(ctx)
	rep.Evidence = ev
	if ev != nil && ev.Verdict != Pass {
		return fail(x.evidenceFailed(pl, ev, werr))
	}
	rep.Said += x.evidenceSaid(ev, werr)
	return k.done(ctx, act, rep)
}

// beginLogical writes the journal of the logical restore about to run (none
// when no key differs: nothing is written then, and only positions are set
// back), with its evidence so far, and returns its run.
func (k *Keeper) beginLogical(ctx context.Context, r Request, pl *restorePlan, aside *Aside, asideRep *busarchive.Report, began, asideBegan time.Time, recovered bool) (*logicalRun, error) {
	j := &journal{Module: r.Module, Local: r.Local, Kind: KindLogical, Point: pl.pointRel,
		Remove: []string{}, Removed: []string{}, Restore: pl.Restore, Restored: []string{},
		Reposition: pl.Reposition, Step: StepLogical, Caller: r.Caller, Why: r.Why, Started: k.now().UTC(), Expect: pl.expect}
	asides := []*Aside{}
	if aside != nil {
		j.Aside, asides = aside.ID, append(asides, aside)
	}
	j.Evidence = startEvidence(j, pl, aside, asideRep, began, asideBegan, k.now, recovered)
	j.Evidence.SetCheck(logicalPointCheck(pl))
	x := &logicalRun{restoreRun: k.newRun(j, asides, pl.point, pl.arch), lp: pl.logical}
	if aside == nil {
		return x, nil
	}
	if err := x.journals.save(ctx, j); err != nil {
		return nil, Errorf(ErrFailed, "restore-kept of %s/%s: %w, so nothing was written; the live values are also set aside as %s in %s",
			r.Module, r.Local, err, aside.ID, k.abs(aside.Dir))
	}
	x.step("journal-written")
	return x, nil
}

// logicalPointCheck is the point-verified check of a logical restore: each
// stream it writes from was checked against its manifest as it was read,
// before anything was written.
func logicalPointCheck(pl *restorePlan) Check {
	fig := &ArchiveFigures{Size: pl.point.ArchiveSize, Sum: pl.point.ArchiveSum, Streams: len(pl.manifest.Streams),
		BytesChecked: dataBytes(pl.manifest),
		How:          "each stream's data was checked against its manifest's SHA-256 as the logical restore read it, before the live values were set aside and before anything was written"}
	ok := fig.BytesChecked > 0
	return Check{Name: CheckPointVerified, Verdict: verdictOf(ok), Archive: fig,
		Said: fmt.Sprintf("%s: %d bytes checked of an archive of %d bytes%s, %d stream(s); %s",
			verdictOf(ok), fig.BytesChecked, fig.Size, sumSaid(fig.Sum), fig.Streams, fig.How)}
}

// execute writes the keys (step logical), then sets the positions on the
// other streams. A write that fails stops the run: nothing was removed, the
// keys written hold the point's value and the others their live one. When
// the bus is away the journal stays, and the keeper finishes the run when
// it answers; otherwise the journal is closed and the error says where the
// run stopped (a restore asked again skips the keys written).
func (x *logicalRun) execute(ctx context.Context) ([]Position, error) {
	j := x.j
	if j.Step == StepLogical {
		if err := x.timed("write", func() error { return x.writeAll(ctx) }); err != nil {
			return nil, x.stopped(ctx, err)
		}
		x.checkLogical(ctx)
		j.Step = StepPosition
		if err := x.save(ctx); err != nil {
			return nil, x.stopped(ctx, err)
		}
	}
	var own *Aside
	if len(x.asides) > 0 {
		own = x.asides[0]
	}
	var set []Position
	err := x.timed("position", func() (err error) {
		set, err = x.setPositions(ctx, own)
		return err
	})
	x.checkConsumers(ctx, err)
	if err != nil {
		x.journals.close(ctx, j)
		return set, err
	}
	x.step("positions-set")
	return set, nil
}

// writeAll writes every differing key of each stream not yet written,
// saving the journal after each stream.
func (x *logicalRun) writeAll(ctx context.Context) error {
	for _, ls := range x.lp.streams {
		if len(ls.keys) == 0 || contains(x.j.Restored, ls.name) {
			continue
		}
		for i, key := range ls.keys {
			if err := x.writeKey(ctx, ls, key); err != nil {
				return fmt.Errorf("writing key %s of stream %s failed after %d of its %d differing key(s) were written: %w",
					ls.keyName(key.subject), ls.name, i, len(ls.keys), err)
			}
			x.step("logical-key:" + key.subject)
		}
		x.j.Restored = append(x.j.Restored, ls.name)
		if err := x.save(ctx); err != nil {
			return err
		}
		x.step("logical-written:" + ls.name)
	}
	return nil
}

// save saves the journal, when the run has one (it set values aside).
func (x *logicalRun) save(ctx context.Context) error {
	if x.j.Aside == "" {
		return nil
	}
	return x.journals.save(ctx, x.j)
}

// stopped is the error of a run that stopped writing.
func (x *logicalRun) stopped(ctx context.Context, err error) error {
	j := x.j
	kept := fmt.Sprintf("the live values it overwrote are set aside as %s in %s", j.Aside, x.records.abs(asideRel(j.Aside)))
	if errors.Is(err, ErrNoBus) || ctx.Err() != nil {
		return fmt.Errorf("logical restore of %s/%s: %w; nothing was removed, and %s; the restore journal stays, so the keeper finishes it when the bus answers",
			j.Module, j.Local, withKind(ErrFailed, err), kept)
	}
	x.journals.close(ctx, j)
	return fmt.Errorf("logical restore of %s/%s: %w; nothing was removed: the keys written hold the point's value, the others their live one, and %s; "+
		"ask again to write the rest (the keys written are skipped), or put the aside back", j.Module, j.Local, withKind(ErrFailed, err), kept)
}

// logicalReply is the reply of a logical restore that ran to its end.
func (k *Keeper) logicalReply(r Request, pl *restorePlan, aside *Aside, set []Position) *Reply {
	var b strings.Builder
	fmt.Fprintf(&b, "Restored %s/%s logically from %s: %s; each written as a new revision, so revisions and times are new, not the point's, and watchers see every key written; nothing was removed",
		r.Module, r.Local, pl.source(), pl.logical.said())
	if aside != nil {
		fmt.Fprintf(&b, "; the live values it overwrote are set aside as %s in %s (a logical aside: it puts back logically)", aside.ID, k.abs(aside.Dir))
	}
	fmt.Fprintf(&b, "; %d consumer position(s) set back on other streams%s, those on the streams written were left where they are.", len(pl.Moves), movesSaid(pl.Moves))
	b.WriteString(pl.unplacedSaid())
	if c := catchUp(pl); c != "" && !pl.logical.fromAside {
		fmt.Fprintf(&b, " The data is at form %d: run %s next.", pl.point.Form, c)
	}
	rep := &Reply{Said: b.String(), Point: pl.point, CatchUp: catchUp(pl), Positions: set, Moves: pl.Moves, Streams: pl.changes}
	if aside != nil {
		rep.Aside, rep.Dir = aside, k.abs(aside.Dir)
	}
	return rep
}

// said is what the plan writes, per stream.
func (lp *logicalPlan) said() string {
	var parts []string
	for _, ls := range lp.streams {
		what := "key(s)"
		if ls.object {
			what = "object(s)"
		}
		parts = append(parts, fmt.Sprintf("%s: %s of %s %s differed", ls.name, grouped(len(ls.keys)), grouped(ls.total), what))
	}
	return strings.Join(parts, ", ")
}

// logicalDryRun replies with what a logical restore would do; nothing was
// changed.
func (k *Keeper) logicalDryRun(ctx context.Context, act Act, r Request, pl *restorePlan) (*Reply, error) {
	said := fmt.Sprintf("Dry run, nothing was changed. A logical restore of %s/%s from %s would write %s as new revisions (revisions and times new, not the point's; watchers see them), "+
		"remove nothing, set aside the live values it overwrites, and set back %d consumer position(s) on other streams%s.",
		r.Module, r.Local, pl.source(), pl.logical.said(), len(pl.Moves), movesSaid(pl.Moves))
	act.What, act.Outcome = said, "planned"
	k.record(ctx, act)
	return &Reply{Said: said, Plan: &pl.RestorePlan, Positions: pl.Reposition, Moves: pl.Moves, CatchUp: catchUp(pl), Streams: pl.changes}, nil
}
