package keeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// evidence_consumers.go); absent in journals of keepers that kept none.
	Evidence *Evidence         `json:"evidence,omitempty"`
	Expect   []ConsumerFigures `json:"-"` // the body, as Reposition
	// Bump is, per stream restored over live data whose last sequence was
	// past the point's, the last sequence it is restored with (the
	// archive's head bumped as it is sent); Expired, per stream, how many
	// of the point's messages its limits remove once restored (the
	// evidence counts them as expired, not missing). See restore_around.go.
	Bump    map[string]uint64 `json:"bump,omitempty"`
	Expired map[string]uint64 `json:"expired,omitempty"`
	// Format is the journal's format (JournalFormat when written; 0 in
	// journals of keepers before formats, read as 1), and WrittenBy the
	// version of the keeper that last wrote it (format.go).
	Format int `json:"format,omitempty"`
	// Delta is, per stream the restore rolls back by the delta method,
	// what it does and how far it got (restore_delta.go); such a journal
	// is of JournalFormatDelta.
	Delta     []deltaStream `json:"delta,omitempty"`
	WrittenBy string        `json:"written-by,omitempty"`
	// Moment is the moment whose archive the restore composed and did not
	// store (restore_at_composed.go): a keeper that takes the restore up
	// makes the point at Point from it first (remakeMoment).
	Moment *journalMoment `json:"moment,omitempty"`

	// body names the parts of the index that hold Reposition and Expect;
	// nil when the head holds them (none to hold, or an older journal).
	// bodyAway says Reposition and Expect are not read yet: a head read
	// without its body (readJournal; loadBody reads it).
	body     *bodyRef
	bodyAway bool
}

func journalKey(module, local string) string { return "journal." + module + "." + local }

// journalStore keeps the restore journals in the index: a head per kept
// data and the parts of its body (journal_parts.go). It holds what it needs
// and calls nothing of the Keeper's, so a restore run carries its own.
type journalStore struct {
	index   Index
	log     *slog.Logger
	version string       // the keeper's, written in every head (WrittenBy)
	hook    func(string) // the step hook of tests; nil for none
}

// journalStore is the keeper's restore journals.
func (k *Keeper) journalStore() journalStore {
	return journalStore{index: k.index, log: k.log, version: k.version, hook: k.stepHook}
}

// step calls the test hook at a step of a journal's writing.
func (js journalStore) step(name string) {
	if js.hook != nil {
		js.hook(name)
	}
}

// save records the journal in the index: its body's parts the first
// time (saveBody), then its head. A journal that cannot be saved stops the
// restore before its next removal.
func (js journalStore) save(ctx context.Context, j *journal) error {
	if err := js.saveBody(ctx, j); err != nil {
		return fmt.Errorf("recording the restore journal in the index: %w", err)
	}
	j.WrittenBy = js.version
	data := encodeHead(j)
	if len(data) > maxJournalHead {
		return fmt.Errorf("recording the restore journal in the index: its head is %d bytes, over the %d it may take, so it was not recorded", len(data), maxJournalHead)
	}
	if err := js.index.Put(ctx, journalKey(j.Module, j.Local), data); err != nil {
		return fmt.Errorf("recording the restore journal in the index: %w", err)
	}
	return nil
}

// close removes a finished restore's journal: its head, then the parts of
// its body. A head that cannot be removed keeps its parts.
func (js journalStore) close(ctx context.Context, j *journal) {
	if err := js.index.Delete(ctx, journalKey(j.Module, j.Local)); err != nil {
		js.log.Warn("could not remove the restore journal from the index", "aside", j.Aside, "err", err)
		return
	}
	js.step("journal-head-removed")
	js.removeBody(ctx, j)
}

// read is the head of the journal of module/local, or nil when there is
// none. Its body (Reposition, Expect) is read by loadBody, where it is
// needed: only to carry the restore on.
func (js journalStore) read(ctx context.Context, module, local string) (*journal, error) {
	data, err := js.index.Get(ctx, journalKey(module, local))
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

// readJournal is the head of the journal of module/local (journalStore.read).
func (k *Keeper) readJournal(ctx context.Context, module, local string) (*journal, error) {
	return k.journalStore().read(ctx, module, local)
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
