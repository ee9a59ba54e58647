package keeper

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// recoverLogical finishes a logical restore a stopped keeper left, under
// the kept data's lock: it reads the journal again, its aside and its
// point, finds again which of the aside's keys still differ from the
// point's value (a key written already does not, and is not written again:
// the run is idempotent), writes them, sets the positions on the other
// streams, and closes the journal. When the point is gone or does not open,
// the aside's values are written back instead: the kept data then ends as
// the live data was. Nothing is removed either way.
func (k *Keeper) recoverLogical(ctx context.Context, j *journal) (string, error) {
	r := Request{Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why}
	ctx, release, err := k.lock(ctx, VerbRestore, r, j.Restore...)
	if err != nil {
		return "", err
	}
	defer release()
	a, err := k.takeUpLogical(ctx, j)
	if err != nil {
		return "", err
	}
	asideArch, err := k.openArchive(ctx, a.Dir, asidePoint(a))
	if err != nil {
		return "", fmt.Errorf("the interrupted logical restore of %s/%s was not taken up: its aside %s does not open (%w); nothing was changed", j.Module, j.Local, a.ID, err)
	}
	defer asideArch.Close()
	p, src, back := k.logicalRecoverySource(ctx, j, a, asideArch)
	if src != asideArch {
		defer src.Close()
	}
	k.log.Warn("finishing an interrupted logical restore", "module", j.Module, "local", j.Local, "aside", j.Aside, "step", j.Step, "put back", back)
	act := Act{Verb: VerbRestore, Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why,
		What: fmt.Sprintf("recovering the logical restore interrupted at step %s", j.Step), Outcome: "intent"}
	k.record(ctx, act)
	lp := &logicalPlan{fromAside: back}
	if j.Step == StepLogical {
		if lp, err = k.replanLogical(ctx, j, a, asideArch, src, back); err != nil {
			return "", fmt.Errorf("the interrupted logical restore of %s/%s was not taken up: %w; nothing was changed, and the keeper tries again", j.Module, j.Local, err)
		}
	}
	if j.Evidence == nil {
		j.Evidence = unprovenStart(j)
	}
	j.Evidence.Recovered = true
	x := &logicalRun{restoreRun: k.newRun(j, []*Aside{a}, p, src), lp: lp}
	set, err := x.execute(ctx)
	said := x.recoveredLogicalSaid(ctx, set, back, err)
	if err != nil {
		act.What, act.Outcome = said, "failed"
		k.record(ctx, act)
		return said, nil
	}
	act.What, act.Outcome = said, "done"
	k.record(ctx, act)
	x.journals.close(ctx, j)
	return said, nil
}

// takeUpLogical reads the journal j again under the lock, whole, and its
// aside. Nothing is changed.
func (k *Keeper) takeUpLogical(ctx context.Context, j *journal) (*Aside, error) {
	js := k.journalStore()
	now, err := js.read(ctx, j.Module, j.Local)
	if err != nil {
		return nil, fmt.Errorf("reading the restore journal of %s/%s: %w; nothing was changed", j.Module, j.Local, err)
	}
	if now == nil || now.Aside != j.Aside || now.kind() != KindLogical {
		return nil, Errorf(ErrBusy, "the restore of %s/%s moved on meanwhile", j.Module, j.Local)
	}
	if err := js.loadBody(ctx, now); err != nil {
		return nil, fmt.Errorf("restore journal %s in the index is unreadable (%w); nothing was changed", journalKey(j.Module, j.Local), err)
	}
	*j = *now
	var a Aside
	if err := k.getJSON(ctx, recordKey(asideRel(j.Aside)), &a); err != nil {
		return nil, fmt.Errorf("the logical restore of %s/%s left a journal but its aside %s is unreadable (%v); nothing was changed",
			j.Module, j.Local, j.Aside, err)
	}
	return &a, nil
}

// logicalRecoverySource is what recovery writes from: the journal's point,
// opened, or, when it is gone or does not open, the aside itself (back: its
// values are put back, and no position is set).
func (k *Keeper) logicalRecoverySource(ctx context.Context, j *journal, a *Aside, asideArch *openedArchive) (*Point, *openedArchive, bool) {
	p, err := k.loadSource(ctx, j.Point)
	if err == nil {
		var src *openedArchive
		if src, err = k.openArchive(ctx, j.Point, p); err == nil {
			return p, src, false
		}
	}
	k.log.Error("the point of an interrupted logical restore is gone or does not open; the live values set aside are written back", "point", j.Point, "err", err)
	j.Reposition, j.Expect = nil, nil
	return asidePoint(a), asideArch, true
}

// replanLogical finds again, per stream the journal has not finished, the
// keys of the aside (those the run set out to write) whose live value
// differs from src's.
func (k *Keeper) replanLogical(ctx context.Context, j *journal, a *Aside, asideArch, src *openedArchive, back bool) (*logicalPlan, error) {
	lp := &logicalPlan{fromAside: back}
	held := 0
	for _, name := range j.Restore {
		if contains(j.Restored, name) {
			continue
		}
		sm := src.Manifest().Stream(name)
		if sm == nil {
			return nil, fmt.Errorf("stream %s is not in %s", name, src.Where)
		}
		keys, err := asideKeys(ctx, asideArch, name, sm.Config.Subjects)
		if err != nil {
			return nil, err
		}
		keys = append(keys, asideScope(asidePoint(a), name)...)
		ls, err := k.planLogicalStreamOf(ctx, src, sm, &logicalScope{keys: keys, all: back}, &held)
		if err != nil {
			return nil, err
		}
		lp.streams = append(lp.streams, ls)
	}
	return lp, nil
}

// asideKeys are the key subjects a logical aside's stream holds.
func asideKeys(ctx context.Context, arch *openedArchive, stream string, subjects []string) ([]string, error) {
	bucket, object, _ := logicalKind(stream, subjects)
	ls := &logicalStream{name: stream, bucket: bucket, object: object}
	rc, err := arch.CheckedStreamData(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("reading stream %s of the aside: %w", stream, err)
	}
	defer rc.Close()
	var keys []string
	_, err = busarchive.ReadStreamArchive(rc, nil, func(m busarchive.ArchivedMessage) error {
		if ls.isKey(m.Subject) {
			keys = append(keys, m.Subject)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading stream %s of the aside: %w", stream, err)
	}
	return keys, nil
}

// recoveredLogicalSaid is what recovery says of a logical run it carried on.
func (x *logicalRun) recoveredLogicalSaid(ctx context.Context, set []Position, back bool, err error) string {
	j := x.j
	ev, werr := x.finishEvidence(ctx)
	evSaid := x.evidenceSaid(ev, werr)
	if err != nil {
		return "the interrupted logical restore was not completed: " + err.Error() + evSaid
	}
	if back {
		return fmt.Sprintf("the interrupted logical restore of %s/%s was undone: its point is gone, so the live values set aside as %s were written back (%s); nothing was removed.%s",
			j.Module, j.Local, j.Aside, x.lp.said(), evSaid)
	}
	return fmt.Sprintf("the interrupted logical restore of %s/%s was completed: of the keys it set out to write, %s still differed and were written as new revisions; %d consumer position(s) were set back on other streams; the live values it overwrote stay set aside as %s.%s",
		j.Module, j.Local, x.lp.said(), len(set), j.Aside, evSaid)
}
