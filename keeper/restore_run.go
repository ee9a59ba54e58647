package keeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/store"
)

// The kinds of journaled restore, each one run of the same machine
// (restoreRun).
const (
	// KindIntoAbsent: none of the kept data was live. Nothing is set aside
	// or removed; a failure removes only what the restore began.
	KindIntoAbsent = "into-absent"
	// KindReplace: the live data was set aside, is removed, and the point
	// is restored in its place; a failure puts the aside back.
	KindReplace = "replace"
	// KindAsideOnly: the live data was set aside and is removed; nothing is
	// restored.
	KindAsideOnly = "aside-only"
)

// The steps of a journaled restore, in order (journal.Step).
const (
	StepRemove   = "remove"   // remove the live streams the aside holds
	StepRestore  = "restore"  // restore the point's streams
	StepPosition = "position" // set the module's consumers back
)

// kind is the journal's kind; journals written before kinds were recorded
// tell it by their aside and point.
func (j *journal) kind() string {
	switch {
	case j.Kind != "":
		return j.Kind
	case j.Aside == "":
		return KindIntoAbsent
	case j.Point == "":
		return KindAsideOnly
	}
	return KindReplace
}

// restoreRun is one journaled restore carried on from where its journal
// stands: by a verb right after it wrote the journal (beginRun), or by
// recovery after a keeper stopped (journal_recover.go). It owns the journal
// and the evidence: every stream removed or restored is saved in the
// journal before the next step, and what the run sees goes into the
// evidence the journal carries (evidence_run.go). What it needs of the
// keeper it holds (runPorts), and it calls nothing back.
type restoreRun struct {
	runPorts
	j *journal
	// asides[0] is the restore's own aside (none for KindIntoAbsent);
	// recovery adds the aside it made of what it found on the bus. A stream
	// is removed only when a complete aside holds it as it stands
	// (removeCovered), or when this very run began restoring it and did
	// not finish.
	asides []*Aside
	point  *Point         // what is restored; nil for aside-only, or when it is gone
	arch   *openedArchive // the point's archive, opened once for the whole restore
	here   []string       // streams whose restore this run began, finished or not
}

// runPorts is what a restore run uses outside itself: the bus, the index
// (through the journal store), the store's records, the log, the clock and
// the test hook, and its bounds.
type runPorts struct {
	bus      Bus
	journals journalStore
	records  runRecords
	log      *slog.Logger
	now      func() time.Time
	hook     func(string) // the step hook of tests; nil for none
	// parallel bounds how many streams are restored at once;
	// evidenceWait the reads of one evidence check.
	parallel     int
	evidenceWait time.Duration
}

// runRecords is what a restore run reads and writes in the store besides
// the journal: the archives it restores and puts back, the point's record,
// and the evidence it writes. The keeper's store records (objects.go,
// archive.go, locate.go) are one.
type runRecords interface {
	abs(rel string) string
	openArchive(ctx context.Context, rel string, rec *Point) (*openedArchive, error)
	readHead(ctx context.Context, rel string) (*Point, error)
	exists(ctx context.Context, key string) (bool, error)
	putJSON(ctx context.Context, key string, v any) (store.Info, error)
	putBytes(ctx context.Context, key string, data []byte) (store.Info, error)
}

// newRun is the run of journal j, with the keeper's ports.
func (k *Keeper) newRun(j *journal, asides []*Aside, point *Point, arch *openedArchive) *restoreRun {
	return &restoreRun{j: j, asides: asides, point: point, arch: arch, runPorts: runPorts{
		bus: k.bus, journals: k.journalStore(), records: k, log: k.log, now: k.now, hook: k.stepHook,
		parallel: k.parallel, evidenceWait: k.evidenceWait}}
}

// step calls the test hook at a step of the run.
func (rp runPorts) step(name string) {
	if rp.hook != nil {
		rp.hook(name)
	}
}

// beginRun writes the journal of the restore about to run, with its
// evidence so far, and returns the run that carries it on. Nothing was
// removed yet.
func (k *Keeper) beginRun(ctx context.Context, r Request, pl *restorePlan, aside *Aside, asideRep *busarchive.Report, began, asideBegan time.Time, recovered bool) (*restoreRun, error) {
	kind := KindIntoAbsent
	if aside != nil {
		kind = KindReplace
		if r.AsideOnly {
			kind = KindAsideOnly
		}
	}
	j := &journal{Module: r.Module, Local: r.Local, Kind: kind, Point: pl.pointRel,
		Remove: pl.Remove, Removed: []string{}, Restore: pl.Restore, Restored: []string{},
		Reposition: pl.Reposition, Step: StepRemove, Caller: r.Caller, Why: r.Why, Started: k.now().UTC(),
		Overrides: pl.Overrides, Expect: pl.expect}
	asides := []*Aside{}
	if aside != nil {
		j.Aside, asides = aside.ID, append(asides, aside)
	} else {
		j.Step = StepRestore // nothing is live, so nothing is removed
	}
	j.Evidence = startEvidence(j, pl, aside, asideRep, began, asideBegan, k.now, recovered)
	x := k.newRun(j, asides, pl.point, pl.arch)
	if err := x.journals.save(ctx, j); err != nil {
		if aside != nil {
			return nil, Errorf(ErrFailed, "restore-kept of %s/%s: %w, so nothing was removed; the live data is also set aside as %s in %s",
				r.Module, r.Local, err, aside.ID, k.abs(aside.Dir))
		}
		return nil, Errorf(ErrFailed, "restore-kept of %s/%s: %w, so nothing was restored", r.Module, r.Local, err)
	}
	x.step("journal-written")
	return x, nil
}

// execute runs the remaining steps. A failure undoes what it must (puts the
// aside back, or removes what it began) and says both outcomes; the journal
// stays when the kept data is not whole on the bus again, so recovery
// finishes the work. On success the journal is left open for the caller to
// close once its act is recorded, so a keeper that dies before recording it
// leaves a journal that recovery finishes (setting the positions again).
func (x *restoreRun) execute(ctx context.Context) ([]Position, error) {
	j := x.j
	if j.Step == StepRemove {
		if err := x.timed("remove", func() error { return x.remove(ctx) }); err != nil {
			return nil, x.giveUp(ctx, err)
		}
		if j.kind() == KindAsideOnly {
			return nil, nil
		}
		if err := x.advance(ctx, StepRestore); err != nil {
			return nil, x.giveUp(ctx, err)
		}
	}
	if j.Step == StepRestore {
		if x.point == nil || x.arch == nil {
			return nil, x.giveUp(ctx, fmt.Errorf("what it restores from, %s, is gone", j.Point))
		}
		if err := x.timed("restore", func() error { return x.restore(ctx) }); err != nil {
			return nil, x.giveUp(ctx, err)
		}
		x.checkRestored(ctx)
		if err := x.advance(ctx, StepPosition); err != nil {
			return nil, x.giveUp(ctx, err)
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

// timed runs step and records its time in the evidence.
func (x *restoreRun) timed(step string, fn func() error) error {
	began := x.now()
	err := fn()
	if x.j.Evidence != nil {
		x.j.Evidence.Timed(step, began, x.now())
	}
	return err
}

// done reports whether the run restored every stream (it reached the
// positions step): the bus then holds the point's data, whatever follows.
func (x *restoreRun) done() bool {
	return x.j.Step == StepPosition && x.j.kind() != KindAsideOnly
}

// source names what the run restores from, for sentences.
func (x *restoreRun) source() string {
	if x.point == nil {
		return x.j.Point
	}
	return sourceName(x.point)
}

// advance moves the journal on to step, and saves it.
func (x *restoreRun) advance(ctx context.Context, step string) error {
	x.j.Step = step
	return x.journals.save(ctx, x.j)
}

// remove deletes the live streams the journal names that are left.
func (x *restoreRun) remove(ctx context.Context) error {
	j := x.j
	for _, s := range j.Remove {
		if contains(j.Removed, s) {
			continue
		}
		seen, err := x.removeCoveredSeen(ctx, x.asides, s)
		if err != nil {
			return fmt.Errorf("removing the live streams failed: %w", err)
		}
		x.sawRemoval(s, seen)
		j.Removed = append(j.Removed, s)
		if err := x.journals.save(ctx, j); err != nil {
			return err
		}
		x.step("removed:" + s)
	}
	return nil
}

// restore restores the point's streams that are left, up to x.parallel at
// once. A stream of such a name on the bus now is one a stopped restore
// began, or one a module made meanwhile: recovery set it aside, and it goes
// only if that copy holds it as it stands.
func (x *restoreRun) restore(ctx context.Context) error {
	j := x.j
	var left []string
	for _, s := range j.Restore {
		if contains(j.Restored, s) {
			continue
		}
		if err := x.removeCovered(ctx, x.asides, s); err != nil {
			return fmt.Errorf("stream %s is in the way of the restore: %w", s, err)
		}
		left = append(left, s)
	}
	if len(left) == 0 {
		return nil
	}
	for try := 1; ; try++ {
		begun, err := x.restoreArchive(ctx, x.arch, left, j.Overrides,
			Progress{Verb: VerbRestore, Module: j.Module, Local: j.Local, Step: "restore",
				StreamsDone: len(j.Restored), StreamsTotal: len(j.Restore)}, func(s string) {
				j.Restored = append(j.Restored, s)
				if err := x.journals.save(ctx, j); err != nil {
					// Recovery would restore this stream again: safe, only slower.
					x.log.Warn("could not record a restored stream in the restore journal", "stream", s, "err", err)
				}
				x.step("restored:" + s)
			})
		// Every stream this run began, finished or not, is removed if the
		// run gives up: the aside is then put back whole.
		x.here = append(x.here, begun...)
		if err == nil {
			return nil
		}
		again := errors.Is(err, ErrNoBus) || errors.Is(err, ErrStaleStream)
		if try == busTries || !again || ctx.Err() != nil || !x.removeUnfinished(ctx, begun) {
			return fmt.Errorf("restoring from %s failed: %w", sourceName(x.point), err)
		}
		// The bus went away part way (a server of the cluster died), or
		// the server still held files of a stream removed just before: what
		// this try began and did not finish is removed; begin those again.
		x.log.Warn("a restore was cut short by the bus or by files the server had not yet removed; restoring the unfinished streams again", "try", try, "err", err)
		left = slices.DeleteFunc(left, func(s string) bool { return contains(j.Restored, s) })
		select {
		case <-ctx.Done():
			return fmt.Errorf("restoring from %s failed: %w", sourceName(x.point), err)
		case <-time.After(min(time.Duration(try)*time.Second, busPauseMax)):
		}
	}
}

// removeUnfinished removes the streams of begun that the run did not finish
// restoring (a server that lost the restore may have removed them itself),
// and reports whether none is left.
func (x *restoreRun) removeUnfinished(ctx context.Context, begun []string) bool {
	for _, s := range begun {
		if contains(x.j.Restored, s) {
			continue
		}
		if err := x.bus.DeleteStream(ctx, s); err != nil && !errors.Is(err, ErrNoStream) {
			x.log.Warn("could not remove a half-restored stream to restore it again", "stream", s, "err", err)
			return false
		}
	}
	return true
}

// setPositions sets back the module's consumers on streams the point does
// not carry (the journal's Reposition); a is the restore's own aside.
func (x *restoreRun) setPositions(ctx context.Context, a *Aside) ([]Position, error) {
	module, local, p, ps := x.j.Module, x.j.Local, x.point, x.j.Reposition
	if p == nil {
		return []Position{}, nil // aside-only: nothing is set back
	}
	set := []Position{}
	for _, pos := range ps {
		if err := x.bus.SetPosition(ctx, pos); err != nil {
			keptAt := "nothing was set aside because none of it was live"
			if a != nil {
				keptAt = fmt.Sprintf("the live data as it was is set aside as %s in %s", a.ID, x.records.abs(a.Dir))
			}
			return set, Errorf(ErrFailed, "restore-kept of %s/%s restored every stream of %s, but setting consumer %s on %s "+
				"back to sequence %d failed (%v), after %d of %d position(s) were set; %s",
				module, local, sourceName(p), pos.Consumer, pos.Stream, pos.AckFloor, err, len(set), len(ps), keptAt)
		}
		set = append(set, pos)
	}
	return set, nil
}

// giveUp undoes a run that failed, and returns the error that says both
// outcomes.
func (x *restoreRun) giveUp(ctx context.Context, err error) error {
	j := x.j
	back, whole := x.putBack(ctx)
	switch j.kind() {
	case KindIntoAbsent:
		if back == "" {
			back = "nothing was restored"
		}
		if !whole {
			back += "; the restore journal stays, so the keeper takes this restore up again when the bus answers"
		} else {
			x.journals.close(ctx, j)
		}
		// The server may have refused a damaged stream before the keeper's
		// own reading found the damage: tell a damaged point from a failed
		// restore.
		var damaged *DamagedError
		if x.arch != nil && !errors.As(err, &damaged) && ctx.Err() == nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNoBus) {
			if _, _, verr := verifyOpened(ctx, x.arch); verr != nil {
				err = fmt.Errorf("%w (the point is damaged: %w)", err, verr)
			}
		}
		return fmt.Errorf("restore-kept of %s/%s from %s failed: %w; %s, and nothing live was touched (none of the kept data was live)",
			j.Module, j.Local, x.source(), withKind(ErrFailed, err), back)
	}
	what := fmt.Sprintf("restore-kept of %s/%s", j.Module, j.Local)
	if j.kind() == KindAsideOnly {
		what = fmt.Sprintf("aside-only of %s/%s", j.Module, j.Local)
	}
	if !whole {
		// The journal stays: recovery finishes this once the bus answers.
		return fmt.Errorf("%s: %w; %s; the restore journal stays, so the keeper finishes this restore or puts the aside back when it can",
			what, withKind(ErrFailed, err), back)
	}
	x.journals.close(ctx, j)
	return fmt.Errorf("%s: %w; %s", what, withKind(ErrFailed, err), back)
}

// putBack undoes a restore that failed after live streams may have been
// removed: it deletes the streams this run began restoring (x.here), then
// brings back from the restore's aside (asides[0]) every one of its streams
// that is not on the bus as the aside holds it. A stream in the way goes
// only if an aside holds it as it stands (removeCovered); otherwise it stays
// and the kept data is not whole yet. It asks the bus rather than trusting
// what the keeper believes it removed: a delete whose reply was lost may
// have happened. It returns a sentence that says both outcomes, and whether
// the kept data is whole on the bus again.
func (x *restoreRun) putBack(ctx context.Context) (string, bool) {
	asides, here := x.asides, x.here
	var notes []string
	var stuck []string
	for _, s := range here {
		if err := x.bus.DeleteStream(ctx, s); err != nil && !errors.Is(err, ErrNoStream) {
			stuck = append(stuck, fmt.Sprintf("%s (%v)", s, err))
		}
	}
	if len(here) > 0 {
		if len(stuck) == 0 {
			notes = append(notes, fmt.Sprintf("the half-restored stream(s) %s were removed", strings.Join(here, ", ")))
		} else {
			notes = append(notes, "the half-restored stream(s) "+strings.Join(stuck, ", ")+" could not be removed")
		}
	}
	if len(asides) == 0 {
		return strings.Join(notes, "; "), len(stuck) == 0
	}
	aside := asides[0]
	if len(stuck) > 0 {
		notes = append(notes, fmt.Sprintf("so the live data was not put back yet; it is complete in aside %s in %s",
			aside.ID, x.records.abs(aside.Dir)))
		return strings.Join(notes, "; "), false
	}
	var missing []string
	for _, st := range aside.Streams {
		si, err := x.bus.Stream(ctx, st.Name)
		switch {
		case errors.Is(err, ErrNoStream):
			missing = append(missing, st.Name)
			continue
		case err != nil:
			notes = append(notes, fmt.Sprintf("whether stream %s is on the bus could not be told (%v), so the live data was not put back yet; it is complete in aside %s in %s",
				st.Name, err, aside.ID, x.records.abs(aside.Dir)))
			return strings.Join(notes, "; "), false
		}
		if sameState(st, si) {
			continue // never removed
		}
		if err := x.removeCovered(ctx, asides[1:], st.Name); err != nil {
			notes = append(notes, fmt.Sprintf("%v, so the live data was not put back yet; it is complete in aside %s in %s",
				err, aside.ID, x.records.abs(aside.Dir)))
			return strings.Join(notes, "; "), false
		}
		missing = append(missing, st.Name)
	}
	if len(missing) == 0 {
		notes = append(notes, "no live stream had been removed")
		notes = append(notes, fmt.Sprintf("the aside %s in %s stays as a copy", aside.ID, x.records.abs(aside.Dir)))
		return strings.Join(notes, "; "), true
	}
	a, err := x.records.openArchive(ctx, aside.Dir, asidePoint(aside))
	if err == nil {
		_, err = x.restoreArchive(ctx, a, missing, nil, // an aside goes back as it was
			Progress{Verb: VerbRestore, Module: aside.Module, Local: aside.Local, Step: "put back"}, nil)
		a.Close()
	}
	if err != nil {
		notes = append(notes, fmt.Sprintf("putting the live data back from aside %s failed too (%v); it is complete in %s",
			aside.ID, err, x.records.abs(aside.Dir)))
		return strings.Join(notes, "; "), false
	}
	notes = append(notes, fmt.Sprintf("the live data was put back from aside %s (%s), which stays in %s",
		aside.ID, strings.Join(missing, ", "), x.records.abs(aside.Dir)))
	return strings.Join(notes, "; "), true
}

// removeCovered deletes one stream of the kept data, only if one of the
// asides (the newest that has it) holds it as it stands (sameState). A stream that took new
// messages since, or that no aside holds, is not removed: that would lose
// it. A stream that is not there is not an error.
func (rp runPorts) removeCovered(ctx context.Context, asides []*Aside, stream string) error {
	_, err := rp.removeCoveredSeen(ctx, asides, stream)
	return err
}

// removeCoveredSeen is removeCovered that also returns the stream as it
// stood the moment before it was removed (nil when it was not there).
func (rp runPorts) removeCoveredSeen(ctx context.Context, asides []*Aside, stream string) (*StreamInfo, error) {
	si, err := rp.bus.Stream(ctx, stream)
	if errors.Is(err, ErrNoStream) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	held, ok := newestHolding(asides, stream)
	if !ok {
		return nil, Errorf(ErrConflict, "stream %s is on the bus but in no set-aside copy, so it was not removed", stream)
	}
	if !sameState(held, si) {
		return nil, Errorf(ErrConflict, "stream %s changed after it was set aside (last sequence %d, now %d; %d message(s), now %d), so it was not removed",
			stream, held.LastSeq, si.LastSeq, held.Messages, si.Messages)
	}
	rp.step("remove:" + stream)
	if err := rp.bus.DeleteStream(ctx, stream); err != nil && !errors.Is(err, ErrNoStream) {
		return nil, fmt.Errorf("deleting stream %s: %w", stream, err)
	}
	return si, nil
}

// sameState reports whether the live stream si took nothing since s was
// recorded: the same last sequence, and no message the record lacks (fewer
// messages or a later first sequence only mean some expired or were
// deleted, which the record still holds).
func sameState(s StreamSum, si *StreamInfo) bool {
	return s.LastSeq == si.LastSeq && si.Messages <= s.Messages && si.FirstSeq >= s.FirstSeq
}

// newestHolding is the record of stream in the newest aside that holds it.
func newestHolding(asides []*Aside, stream string) (StreamSum, bool) {
	for i := len(asides) - 1; i >= 0; i-- {
		for _, s := range asides[i].Streams {
			if s.Name == stream {
				return s, true
			}
		}
	}
	return StreamSum{}, false
}
