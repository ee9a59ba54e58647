package keeper

import (
	"context"
	"fmt"
	"log/slog"
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
	StepRemove  = "remove"  // remove the live streams the aside holds
	StepRestore = "restore" // restore the point's streams
	// StepDelta (restore_delta.go), only in a journal with delta streams:
	// delete their tails, set their configuration back.
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
	// composed is the state of each stream put back whole from a delta's
	// tail and its base point (restore_tail_putback.go), for the evidence.
	composed map[string]busarchive.ArchiveHead
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
		next := StepPosition
		if len(j.Delta) > 0 {
			next = StepDelta
		}
		if err := x.advance(ctx, next); err != nil {
			return nil, x.giveUp(ctx, err)
		}
	}
	if j.Step == StepDelta {
		// From here the run only goes forward (restore_delta.go): a
		// failure leaves the journal for the keeper to finish.
		if err := x.timed("delta", func() error { return x.delta(ctx) }); err != nil {
			return nil, x.deltaStopped(err)
		}
		x.checkDelta(ctx)
		if err := x.advance(ctx, StepPosition); err != nil {
			return nil, x.deltaStopped(err)
		}
	}
	return x.positionsStep(ctx)
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

// done reports whether the run restored every stream and rolled back every
// delta stream (it reached the positions step): the bus then holds the
// point's data, whatever follows.
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
