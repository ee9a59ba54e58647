package keeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// journal is the durable record of a restore in progress, in the index as
// journal.<module>.<local> (on the bus, so any keeper of the index can
// finish it, whatever its disk). It is written before any live stream is
// removed, and rewritten after every stream removed or restored, so that a
// keeper that starts again can finish the restore or put the aside back
// (Recover).
//
// A restore into absent kept data has no aside (Aside is ""): it is written
// before the first stream is begun. A keeper that starts again takes such a
// restore up again as a restore-kept of the same point (recoverIntoAbsent).
//
// Its lists of consumers (Reposition, Expect) are its body, kept in parts
// beside it so that the journal.<module>.<local> head stays small whatever
// the number of the module's consumers (journal_parts.go).
type journal struct {
	Module     string     `json:"module"`
	Local      string     `json:"local"`
	Aside      string     `json:"aside"`           // aside id
	Point      string     `json:"point,omitempty"` // key prefix of what it restores; empty for aside-only
	Remove     []string   `json:"remove"`
	Removed    []string   `json:"removed"`
	Restore    []string   `json:"restore"`
	Restored   []string   `json:"restored"`
	Reposition []Position `json:"-"`                   // the body (journal_parts.go); fixed once the journal is first saved
	Kind       string     `json:"kind,omitempty"`      // KindIntoAbsent, KindReplace, KindAsideOnly (empty in older journals: see kind)
	Step       string     `json:"step"`                // StepRemove, StepRestore, StepPosition
	Overrides  *Overrides `json:"overrides,omitempty"` // what the point's restored streams' configuration changes
	Caller     string     `json:"caller,omitempty"`
	Why        string     `json:"why,omitempty"`
	Started    time.Time  `json:"started"`
	// Evidence is the restore's evidence report so far, and Expect what
	// each consumer it sets back must be once it is done (see
	// evidence_run.go); absent in journals of keepers that kept none.
	Evidence *Evidence         `json:"evidence,omitempty"`
	Expect   []ConsumerFigures `json:"-"` // the body, as Reposition
	// Format is the journal's format (JournalFormat when written; 0 in
	// journals of keepers before formats, read as 1), and WrittenBy the
	// version of the keeper that last wrote it (format.go).
	Format    int    `json:"format,omitempty"`
	WrittenBy string `json:"written-by,omitempty"`

	// body names the parts of the index that hold Reposition and Expect;
	// nil when the head holds them (none to hold, or an older journal).
	// bodyAway says Reposition and Expect are not read yet: a head read
	// without its body (readJournal; loadBody reads it).
	body     *bodyRef
	bodyAway bool
}

func journalKey(module, local string) string { return "journal." + module + "." + local }

// saveJournal records the journal in the index: its body's parts the first
// time (saveBody), then its head. A journal that cannot be saved stops the
// restore before its next removal.
func (k *Keeper) saveJournal(ctx context.Context, j *journal) error {
	if err := k.saveBody(ctx, j); err != nil {
		return fmt.Errorf("recording the restore journal in the index: %w", err)
	}
	j.WrittenBy = k.version
	data := encodeHead(j)
	if len(data) > maxJournalHead {
		return fmt.Errorf("recording the restore journal in the index: its head is %d bytes, over the %d it may take, so it was not recorded", len(data), maxJournalHead)
	}
	if err := k.index.Put(ctx, journalKey(j.Module, j.Local), data); err != nil {
		return fmt.Errorf("recording the restore journal in the index: %w", err)
	}
	return nil
}

// closeJournal removes a finished restore's journal: its head, then the
// parts of its body. A head that cannot be removed keeps its parts.
func (k *Keeper) closeJournal(ctx context.Context, j *journal) {
	if err := k.index.Delete(ctx, journalKey(j.Module, j.Local)); err != nil {
		k.log.Warn("could not remove the restore journal from the index", "aside", j.Aside, "err", err)
		return
	}
	k.hook("journal-head-removed")
	k.removeBody(ctx, j)
}

// readJournal is the head of the journal of module/local, or nil when
// there is none. Its body (Reposition, Expect) is read by loadBody, where
// it is needed: only to carry the restore on.
func (k *Keeper) readJournal(ctx context.Context, module, local string) (*journal, error) {
	data, err := k.index.Get(ctx, journalKey(module, local))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j journal
	err = decodeJournal(data, &j)
	var fe *FormatError
	if errors.As(err, &fe) {
		fe.What = "restore journal " + journalKey(module, local)
		return nil, fe
	}
	if err != nil || j.Module != module || j.Local != local {
		return nil, fmt.Errorf("restore journal %s in the index is unreadable (%v)", journalKey(module, local), err)
	}
	return &j, nil
}

// hasJournal reports whether the aside belongs to an unfinished restore.
// A journal that cannot be read counts as one: the aside is then left alone.
func (k *Keeper) hasJournal(ctx context.Context, asideID string) bool {
	module, local, err := ParseAsideID(asideID)
	if err != nil {
		return false
	}
	j, err := k.readJournal(ctx, module, local)
	return err != nil || (j != nil && j.Aside == asideID)
}

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
		if j.Aside != "" {
			s, err = k.recoverOne(ctx, j)
		} else {
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

func (k *Keeper) recoverOne(ctx context.Context, j *journal) (string, error) {
	r := Request{Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why, AsideOnly: j.Point == ""}
	ctx, release, err := k.lock(ctx, VerbRestore, r, k.journalStreams(ctx, j)...)
	if err != nil {
		return "", err
	}
	defer release()
	// Read it again under the lock: it may have moved on, or ended.
	now, err := k.readJournal(ctx, j.Module, j.Local)
	if err != nil {
		return "", fmt.Errorf("reading the restore journal of %s/%s: %w; nothing was changed", j.Module, j.Local, err)
	}
	if now == nil || now.Aside != j.Aside {
		return "", Errorf(ErrBusy, "the restore of %s/%s moved on meanwhile", j.Module, j.Local)
	}
	if err := k.loadBody(ctx, now); err != nil {
		return "", fmt.Errorf("restore journal %s in the index is unreadable (%w); nothing was changed", journalKey(j.Module, j.Local), err)
	}
	*j = *now
	// A restore the stopped keeper began may still be stored by the
	// server: what to set aside is what it holds once it settles.
	if err := k.settle(ctx, restoring(j)); err != nil {
		return "", fmt.Errorf("the interrupted restore of %s/%s was not taken up: %w; nothing was removed", j.Module, j.Local, err)
	}
	var a Aside
	if err := k.getJSON(ctx, recordKey(asideRel(j.Aside)), &a); err != nil {
		return "", fmt.Errorf("the restore of %s/%s left a journal but its aside %s is unreadable (%v); nothing was changed",
			j.Module, j.Local, j.Aside, err)
	}
	k.log.Warn("finishing an interrupted restore", "module", j.Module, "local", j.Local, "aside", j.Aside, "step", j.Step)
	act := Act{Verb: VerbRestore, Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why,
		What: fmt.Sprintf("recovering the restore interrupted at step %s", j.Step), Outcome: "intent"}
	k.record(ctx, act)
	var p *Point
	if j.Point != "" {
		if p, err = k.loadSource(ctx, j.Point); err != nil {
			p = nil // the point is gone: put the aside back
		}
	}
	asides := []*Aside{&a}
	if err := k.canOpen(p, &a); err != nil {
		return "", fmt.Errorf("the interrupted restore of %s/%s was not taken up: %w; nothing was removed, and the keeper tries again once it has the identity", j.Module, j.Local, err)
	}
	found, err := k.foundOnBus(ctx, j, &a, p)
	if err != nil {
		return "", fmt.Errorf("the interrupted restore of %s/%s was not taken up: %w; nothing was removed", j.Module, j.Local, err)
	}
	if len(found) > 0 {
		k.log.Warn("setting aside what is on the bus before recovery removes it", "module", j.Module, "local", j.Local, "streams", found)
		ra, _, err := k.setAsideStreams(ctx, r, found, ReasonRecovery, j.Point, nil)
		if err != nil {
			return "", fmt.Errorf("the interrupted restore of %s/%s was not taken up: setting aside %s, found on the bus, failed: %w; nothing was removed, and the keeper tries again",
				j.Module, j.Local, strings.Join(found, ", "), err)
		}
		asides = append(asides, ra)
	}
	if j.Evidence == nil {
		j.Evidence = unprovenStart(j)
	}
	j.Evidence.Recovered = true
	x := &run{k: k, j: j, asides: asides, point: p, parallel: k.parallel}
	if p != nil {
		if x.arch, err = k.openArchive(ctx, j.Point, p); err != nil {
			x.point = nil // a damaged point is as good as gone: put the aside back
			k.log.Error("the point of an interrupted restore does not open; its aside is put back", "point", j.Point, "err", err)
		} else {
			defer x.arch.Close()
		}
	}
	set, err := x.execute(ctx)
	var evSaid string
	if err == nil || x.done() {
		ev, werr := k.finishEvidence(ctx, j)
		evSaid = k.evidenceSaid(ev, werr)
	}
	said := fmt.Sprintf("the interrupted restore of %s/%s was completed: the %d stream(s) restored are on the bus and %d consumer position(s) were set back; the live data as it was stays set aside as %s",
		j.Module, j.Local, len(j.Restore), len(set), j.Aside)
	if j.Point == "" {
		said = fmt.Sprintf("the interrupted aside-only of %s/%s was completed: the live data is set aside as %s and removed from the bus",
			j.Module, j.Local, j.Aside)
	}
	if len(asides) > 1 {
		said += fmt.Sprintf("; what was on the bus of it when the keeper came back (%s) is set aside as %s", strings.Join(found, ", "), asides[1].ID)
	}
	if err != nil {
		// Putting the aside back is one of the two outcomes recovery may end in.
		said = "the interrupted restore was not completed: " + err.Error() + evSaid
		k.log.Error("interrupted restore rolled back", "module", j.Module, "local", j.Local, "err", err)
		act.What, act.Outcome = said, "rolled back"
		k.record(ctx, act)
		return said, nil
	}
	said += "." + evSaid
	act.What, act.Outcome = "interrupted restore: "+said, "done"
	k.record(ctx, act)
	k.closeJournal(ctx, j)
	return said, nil
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
	r := Request{Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why, From: j.Point}
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
		k.closeJournal(ctx, j)
		said := fmt.Sprintf("the interrupted restore of %s/%s was not taken up: its restore point %s is gone (%v), so what is on the bus of it was left as it is",
			j.Module, j.Local, j.Point, err)
		k.record(ctx, Act{Verb: VerbRestore, Module: j.Module, Local: j.Local, Caller: j.Caller, Why: j.Why, What: said, Outcome: "failed"})
		return said, nil
	}
	rep, err := k.restoreLocked(ctx, r, false)
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
		k.closeJournal(ctx, &j)
	}
}

// unfinished refuses a verb on a kept data whose last restore left a journal:
// until recovery finishes it, the bus may hold only part of the kept data.
// The refusal says whether recovery waits, why, and what ends the wait.
func (k *Keeper) unfinished(ctx context.Context, verb, module, local string) error {
	j, err := k.readJournal(ctx, module, local)
	var fe *FormatError
	switch {
	case errors.As(err, &fe):
		return Errorf(ErrConflict, "%s refused: %v, to finish or undo the restore it records; nothing was done, and every other kept data is served", verb, err)
	case err != nil:
		return Errorf(ErrConflict, "%s refused: %s/%s has a restore journal that cannot be read (%v); %s; so nothing was done",
			verb, module, local, err, k.waitSaid(module, local))
	case j == nil:
		return nil
	case j.Aside == "":
		return Errorf(ErrConflict, "%s refused: %s/%s has an unfinished restore into absent kept data; %s; so nothing was done",
			verb, module, local, k.waitSaid(module, local))
	}
	return Errorf(ErrConflict, "%s refused: %s/%s has an unfinished restore (aside %s); %s; so nothing was done",
		verb, module, local, j.Aside, k.waitSaid(module, local))
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
