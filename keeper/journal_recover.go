package keeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// Recover finds every restore that a stopped keeper left unfinished and
// either completes it or puts the set-aside data back, so that the kept data
// ends whole on the bus. Each outcome is recorded as an act. It says per
// kept data what it did: done (finished or rolled back, with a sentence),
// or waits, with why: a kept data whose recovery cannot finish now (a
// stream still being written, a journal it cannot read, an identity it
// lacks, the bus away) keeps its journal, so its verbs stay refused, and
// waits for the next round; it holds back no other kept data. Its error
// says only that the journals could not be listed at all.
func (k *Keeper) Recover(ctx context.Context) (Recovery, error) {
	k.releaseDeadLeases(ctx)
	js, rec, err := k.journals(ctx)
	if err != nil {
		return nil, err
	}
	for _, j := range js {
		var s string
		var err error
		switch {
		case j.kind() == KindLogical:
			s, err = k.recoverLogical(ctx, j) // restore_logical_recover.go
		case j.Aside != "":
			s, err = k.recoverOne(ctx, j)
		default:
			s, err = k.recoverIntoAbsent(ctx, j)
		}
		switch {
		case errors.Is(err, ErrBusy):
			// a verb holds it; not interrupted
		case err != nil && ctx.Err() != nil:
			// the keeper is stopping: the journal stays for the next start
			k.log.Info("recovery of an interrupted restore stopped with the keeper; the next start takes it up", "module", j.Module, "local", j.Local)
		case err != nil:
			rec = append(rec, waits(j.Module, j.Local, err))
		default:
			rec = append(rec, done(j.Module, j.Local, s))
		}
	}
	if _, err := k.sweepJournalParts(ctx); err != nil {
		k.log.Warn("could not sweep the parts of finished restore journals; the next round of recovery tries again", "err", err)
	}
	rec = k.waits.note(rec, k.now())
	for _, w := range rec.Waiting() {
		k.log.Error("an interrupted restore waits for recovery; the kept data's verbs are refused until it is finished or undone, and the keeper tries again",
			"module", w.Module, "local", w.Local, "since", w.Since.UTC().Format(time.RFC3339), "why", w.Err.Error())
	}
	return rec, nil
}

// journals lists the restore journals in the index, and a waiting outcome
// for each one it cannot read (a newer keeper's, or damaged): only that
// kept data waits. Its error says the index could not be listed.
func (k *Keeper) journals(ctx context.Context) ([]*journal, Recovery, error) {
	keys, err := k.index.Keys(ctx, "journal.")
	if err != nil {
		return nil, nil, fmt.Errorf("listing restore journals in the index: %w", err)
	}
	var out []*journal
	var unread Recovery
	for _, key := range keys {
		module, local := journalKeyParts(key)
		data, err := k.index.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			continue // finished meanwhile
		}
		if err != nil {
			unread = append(unread, waits(module, local, fmt.Errorf("reading restore journal %s: %w; nothing was changed", key, err)))
			continue
		}
		var j journal
		err = decodeJournal(data, &j)
		var fe *FormatError
		if errors.As(err, &fe) {
			fe.What = "restore journal " + key
			unread = append(unread, waits(module, local, fe))
			continue
		}
		if err != nil || journalKey(j.Module, j.Local) != key {
			unread = append(unread, waits(module, local, fmt.Errorf("restore journal %s in the index is unreadable (%v), so it was left alone: "+
				"if a newer keeper wrote it, run that keeper (or a newer one) to finish it", key, err)))
			continue
		}
		if j.Aside != "" || j.Point != "" {
			out = append(out, &j)
		}
	}
	return out, unread, nil
}

// recoverOne takes up an interrupted restore that set data aside, under
// the kept data's lock: it reads the journal again, sets aside what is on
// the bus of it that its aside does not hold, and carries the run on from
// the journal's step (restoreRun.execute), which finishes it or puts the
// aside back.
func (k *Keeper) recoverOne(ctx context.Context, j *journal) (string, error) {
	r := Request{Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why, AsideOnly: j.Point == ""}
	ctx, release, err := k.lock(ctx, VerbRestore, r, k.journalStreams(ctx, j)...)
	if err != nil {
		return "", err
	}
	defer release()
	a, err := k.takeUp(ctx, j)
	if err != nil {
		return "", err
	}
	k.log.Warn("finishing an interrupted restore", "module", j.Module, "local", j.Local, "aside", j.Aside, "step", j.Step)
	act := Act{Verb: VerbRestore, Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why,
		What: fmt.Sprintf("recovering the restore interrupted at step %s", j.Step), Outcome: "intent"}
	k.record(ctx, act)
	x, found, err := k.recoveryRun(ctx, r, j, a)
	if err != nil {
		return "", err
	}
	if x.arch != nil {
		defer x.arch.Close()
	}
	set, err := x.execute(ctx)
	said := x.recoveredSaid(ctx, set, found, err)
	if err != nil {
		// Putting the aside back is one of the two outcomes recovery may end in.
		k.log.Error("interrupted restore rolled back", "module", j.Module, "local", j.Local, "err", err)
		act.What, act.Outcome = said, "rolled back"
		k.record(ctx, act)
		return said, nil
	}
	act.What, act.Outcome = "interrupted restore: "+said, "done"
	k.record(ctx, act)
	x.journals.close(ctx, j)
	return said, nil
}

// takeUp reads the journal j again under the lock, whole (it may have
// moved on, or ended), waits for the bus to settle what the stopped keeper
// began, and reads the restore's aside. Nothing is changed.
func (k *Keeper) takeUp(ctx context.Context, j *journal) (*Aside, error) {
	js := k.journalStore()
	now, err := js.read(ctx, j.Module, j.Local)
	if err != nil {
		return nil, fmt.Errorf("reading the restore journal of %s/%s: %w; nothing was changed", j.Module, j.Local, err)
	}
	if now == nil || now.Aside != j.Aside {
		return nil, Errorf(ErrBusy, "the restore of %s/%s moved on meanwhile", j.Module, j.Local)
	}
	if err := js.loadBody(ctx, now); err != nil {
		return nil, fmt.Errorf("restore journal %s in the index is unreadable (%w); nothing was changed", journalKey(j.Module, j.Local), err)
	}
	*j = *now
	// A restore the stopped keeper began may still be stored by the
	// server: what to set aside is what it holds once it settles.
	if err := k.settle(ctx, restoring(j)); err != nil {
		return nil, fmt.Errorf("the interrupted restore of %s/%s was not taken up: %w; nothing was removed", j.Module, j.Local, err)
	}
	var a Aside
	if err := k.getJSON(ctx, recordKey(asideRel(j.Aside)), &a); err != nil {
		return nil, fmt.Errorf("the restore of %s/%s left a journal but its aside %s is unreadable (%v); nothing was changed",
			j.Module, j.Local, j.Aside, err)
	}
	return &a, nil
}

// recoveryRun is the run that carries on the journal j of aside a: with
// its point and the point's archive opened (none when the point is gone or
// does not open: the aside is then put back), and, after a, an aside of
// what is on the bus of the kept data that a does not hold (found). Its
// evidence says it was recovered. Nothing was removed.
func (k *Keeper) recoveryRun(ctx context.Context, r Request, j *journal, a *Aside) (_ *restoreRun, found []string, _ error) {
	var p *Point
	if j.Point != "" {
		var err error
		if p, err = k.loadSource(ctx, j.Point); err != nil {
			p = nil // the point is gone: put the aside back
		}
		if p == nil && j.Moment != nil {
			// A moment composed and not stored: made now, from the same
			// base and segments, before anything is carried on.
			if p, err = k.remakeMoment(ctx, j); err != nil {
				if !momentGone(err) {
					return nil, nil, fmt.Errorf("the interrupted restore of %s/%s was not taken up: making the point of its moment %s from its base and segments: %w; nothing was removed, and the keeper tries again",
						j.Module, j.Local, j.Point, err)
				}
				p = nil
				k.log.Error("the moment of an interrupted restore cannot be made again from its base and segments; its aside is put back",
					"point", j.Point, "base", j.Moment.Base, "err", err)
			}
		}
	}
	asides := []*Aside{a}
	if err := k.canOpen(p, a); err != nil {
		return nil, nil, fmt.Errorf("the interrupted restore of %s/%s was not taken up: %w; nothing was removed, and the keeper tries again once it has the identity", j.Module, j.Local, err)
	}
	found, err := k.foundOnBus(ctx, j, a, p)
	if err != nil {
		return nil, nil, fmt.Errorf("the interrupted restore of %s/%s was not taken up: %w; nothing was removed", j.Module, j.Local, err)
	}
	if len(found) > 0 {
		k.log.Warn("setting aside what is on the bus before recovery removes it", "module", j.Module, "local", j.Local, "streams", found)
		ra, _, err := k.setAsideStreams(ctx, r, found, ReasonRecovery, j.Point, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("the interrupted restore of %s/%s was not taken up: setting aside %s, found on the bus, failed: %w; nothing was removed, and the keeper tries again",
				j.Module, j.Local, strings.Join(found, ", "), err)
		}
		asides = append(asides, ra)
	}
	if j.Evidence == nil {
		j.Evidence = unprovenStart(j)
	}
	j.Evidence.Recovered = true
	x := k.newRun(j, asides, p, nil)
	if p != nil {
		if x.arch, err = k.openArchive(ctx, j.Point, p); err != nil {
			x.point = nil // a damaged point is as good as gone: put the aside back
			k.log.Error("the point of an interrupted restore does not open; its aside is put back", "point", j.Point, "err", err)
		} else if j.Moment != nil {
			if err := sameMoment(j.Moment, p); err != nil {
				x.arch.Close()
				x.arch, x.point = nil, nil // not what was restored in part: put the aside back
				k.log.Error("the point of the moment of an interrupted restore does not hold what it composed; its aside is put back", "point", j.Point, "err", err)
			}
		}
	}
	return x, found, nil
}

// recoveredSaid is what recovery says of a run it carried on: set the
// positions it set back, found what it set aside of the bus first, err
// why it was not completed. Its evidence is written when it restored every
// stream.
func (x *restoreRun) recoveredSaid(ctx context.Context, set []Position, found []string, err error) string {
	j := x.j
	var evSaid string
	if err == nil || x.done() {
		ev, werr := x.finishEvidence(ctx)
		evSaid = x.evidenceSaid(ev, werr)
	}
	if err != nil {
		return "the interrupted restore was not completed: " + err.Error() + evSaid
	}
	said := fmt.Sprintf("the interrupted restore of %s/%s was completed: the %d stream(s) restored are on the bus and %d consumer position(s) were set back; the live data as it was stays set aside as %s",
		j.Module, j.Local, len(j.Restore), len(set), j.Aside)
	if j.Point == "" {
		said = fmt.Sprintf("the interrupted aside-only of %s/%s was completed: the live data is set aside as %s and removed from the bus",
			j.Module, j.Local, j.Aside)
	}
	if len(x.asides) > 1 {
		said += fmt.Sprintf("; what was on the bus of it when the keeper came back (%s) is set aside as %s", strings.Join(found, ", "), x.asides[1].ID)
	}
	return said + "." + evSaid
}

// journalStreams is every stream under the kept data's names of a journal:
// its plan's or the naming rule's, and the journal's removals and restores.
func (k *Keeper) journalStreams(ctx context.Context, j *journal) []string {
	names, _, err := k.candidates(ctx, j.Module, j.Local)
	if err != nil {
		names = namingRule(j.Module, j.Local)
	}
	for _, s := range append(append([]string{}, j.Remove...), j.Restore...) {
		if !contains(names, s) {
			names = append(names, s)
		}
	}
	return names
}

// foundOnBus lists what recovery must set aside before it removes anything:
// every stream on the bus under the kept data's names (the naming rule or
// plan, the journal's removals and restores) that is neither held, as it
// stands, by the restore's aside, nor fully restored by the interrupted
// restore and kept. That covers a stream the stopped keeper left
// half-restored, one a module wrote into or made again meanwhile, and,
// when the point is gone (the aside is then put back), the streams already
// restored.
func (k *Keeper) foundOnBus(ctx context.Context, j *journal, a *Aside, p *Point) ([]string, error) {
	var found []string
	for _, s := range k.journalStreams(ctx, j) {
		si, err := k.bus.Stream(ctx, s)
		if errors.Is(err, ErrNoStream) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("looking up stream %s: %w", s, err)
		}
		if ds := deltaIn(j.Delta, s); ds != nil && si.LastSeq == ds.TailTo {
			continue // a delta stream: the point holds up to its tail, the aside the tail, and nothing came since
		}
		if held, ok := newestHolding([]*Aside{a}, s); ok && sameState(held, si) {
			continue // still the live stream the aside holds
		}
		if p != nil && contains(j.Restored, s) {
			continue // restored whole; what a module wrote since is live data, and stays
		}
		found = append(found, s)
	}
	return found, nil
}

// recoverIntoAbsent takes up a restore into absent kept data that a stopped
// keeper left unfinished: as a restore-kept of the same point, so whatever
// is on the bus under the kept data's names now — streams the restore had
// begun, or ones a module made since — is set aside (a complete, verified
// copy) before it is removed, never just deleted. If the point is gone, what
// is on the bus is left as it is. Either way the journal is then closed; a
// restore that sets data aside journals itself.
func (k *Keeper) recoverIntoAbsent(ctx context.Context, j *journal) (string, error) {
	// Downstream "leave": the restore was begun, and the streams that
	// mirror or source it were judged then; carrying it on is not refused.
	r := Request{Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why, From: j.Point, Downstream: kept.DownstreamLeave}
	ctx, release, err := k.lock(ctx, VerbRestore, r, k.journalStreams(ctx, j)...)
	if err != nil {
		return "", err
	}
	defer release()
	// Read it again under the lock: it may have moved on, or ended.
	data, err := k.index.Get(ctx, journalKey(j.Module, j.Local))
	if errors.Is(err, ErrNotFound) {
		return "", Errorf(ErrBusy, "the restore of %s/%s finished meanwhile", j.Module, j.Local)
	}
	if err != nil {
		return "", fmt.Errorf("reading the restore journal of %s/%s: %w; nothing was changed", j.Module, j.Local, err)
	}
	if err := decodeJournal(data, j); err != nil || j.Aside != "" {
		return "", Errorf(ErrBusy, "the restore journal of %s/%s changed meanwhile", j.Module, j.Local)
	}
	if err := k.settle(ctx, restoring(j)); err != nil {
		return "", fmt.Errorf("the interrupted restore of %s/%s was not taken up: %w; nothing was removed", j.Module, j.Local, err)
	}
	k.log.Warn("taking up an interrupted restore into absent kept data", "module", j.Module, "local", j.Local, "point", j.Point, "restored", j.Restored)
	if _, err := k.loadSource(ctx, j.Point); err != nil {
		k.journalStore().close(ctx, j)
		said := fmt.Sprintf("the interrupted restore of %s/%s was not taken up: its restore point %s is gone (%v), so what is on the bus of it was left as it is",
			j.Module, j.Local, j.Point, err)
		k.record(ctx, Act{Verb: VerbRestore, Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why, What: said, Outcome: "failed"})
		return said, nil
	}
	rep, err := k.restoreLocked(ctx, r, false, nil)
	var ee *EvidenceError
	if errors.As(err, &ee) {
		// Done, but its evidence fails: the restore's journal is closed.
		k.closeJournalIfAbsent(ctx, j.Module, j.Local)
		return "the interrupted restore of " + j.Module + "/" + j.Local + " was taken up and done, but it failed: " + err.Error(), nil
	}
	if errors.Is(err, ErrNoBus) {
		return "", fmt.Errorf("the interrupted restore of %s/%s was not completed: %w; it waits for the bus", j.Module, j.Local, err)
	}
	if err != nil {
		// Not a bus that is away: trying again would fail again and keep
		// the kept data refusing every verb. A restore that set data
		// aside has its own journal by now.
		k.closeJournalIfAbsent(ctx, j.Module, j.Local)
		return "the interrupted restore was not completed: " + err.Error(), nil
	}
	k.closeJournalIfAbsent(ctx, j.Module, j.Local)
	return "the interrupted restore of " + j.Module + "/" + j.Local + " was completed: " + rep.Said, nil
}

// closeJournalIfAbsent removes the index's journal of module/local if it is
// still that of a restore into absent kept data.
func (k *Keeper) closeJournalIfAbsent(ctx context.Context, module, local string) {
	data, err := k.index.Get(ctx, journalKey(module, local))
	if err != nil {
		return
	}
	var j journal
	if decodeJournal(data, &j) == nil && j.Aside == "" {
		k.journalStore().close(ctx, &j)
	}
}

// canOpen refuses, with ErrLocked, to take up an interrupted restore whose
// point p (nil for an aside-only) or aside a is encrypted when this keeper
// has no identity: finishing it and rolling it back both read them.
func (k *Keeper) canOpen(p *Point, a *Aside) error {
	if k.unseal.Holds() {
		return nil
	}
	if p != nil && p.Encrypted != nil {
		return Errorf(ErrLocked, "its point %s is encrypted and this keeper has no --identity to decrypt it", k.abs(p.Dir))
	}
	if a.Encrypted != nil {
		return Errorf(ErrLocked, "its set-aside copy %s is encrypted and this keeper has no --identity to decrypt it", k.abs(a.Dir))
	}
	return nil
}
