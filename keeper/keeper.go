// Package keeper is nats-keeper's domain core: restore points, set-aside
// copies, plans, consumer positions, locks and the order of steps that keeps
// every byte of a kept data in at least one complete, verifiable place.
//
// It talks to the bus through Bus, to its index through Index and records acts
// through Acts, and keeps points and asides in a store.Store (a directory, a
// JetStream object store, S3); it never imports nats.go. What the store holds
// is the truth; the index can be rebuilt from it (Rebuild).
//
// A Keeper (New, from a Config) has one method per verb of the contract's
// table (kept.Verbs), each taking a kept.Request and giving a kept.Reply;
// Handle runs the verb named (handle.go binds the table to the methods), and
// package verbs serves Handle on the bus. The request checks, the error
// kinds with their wire and exit codes, and the reply bounds are the
// contract's (package kept); contract.go gives their names a short form here
// (Request is kept.Request).
//
// Every error a verb returns is a sentence that says what happened and what
// did not, and carries one kind for errors.Is (kept.ErrBadRequest,
// ErrNotFound, ErrBusy, ErrConflict, ErrFailed, ErrNoBus, ErrDenied).
//
// It may import kept, its own sub-packages (layout, archives, spool), transfer, store,
// busarchive and agecrypt; never nats.go or the adapters, which implement
// its ports from above.
package keeper

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/keeper/spool"
	"github.com/nats-keeper/nats-keeper/store"
)

// Config configures a Keeper.
type Config struct {
	Store   store.Store      // where points and asides live
	Bus     Bus              // the bus the kept data lives on
	Index   Index            // the index (the kept bucket)
	Acts    Acts             // where acts are recorded
	Logger  *slog.Logger     // nil means slog.Default()
	Version string           // the keeper's version, recorded in archives
	Now     func() time.Time // nil means time.Now
	// StepHook, when set, is called at each step of a restore ("aside:point-wait"
	// in a rollback, its aside whole but waiting for the point's verification
	// before its commit mark; "journal-parts-written" (a journal's body,
	// before its head), "journal-written", "remove:<stream>",
	// "removed:<stream>", "restored:<stream>", "positions-set",
	// "journal-head-removed" (a closed journal's head, before its body)).
	// It exists for crash tests.
	StepHook func(step string)
	// ID names this keeper in leases; empty means host:pid:random.
	ID string
	// LeaseTTL is how long a lease lives unless renewed; 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// StreamParallel is how many streams of one kept data a snapshot takes,
	// and a restore restores, at once, on every path (a snapshot-kept, a
	// set-aside, a restore into absent or over live data, recovery, putting
	// an aside back); 0 means DefaultStreamParallel(), 1 one at a time. A
	// snapshot takes streams at once only with SpoolDir set.
	StreamParallel int
	// SpoolDir is a private directory of the keeper's where a snapshot
	// taking several streams at once spools the ones whose turn in the
	// archive has not come, beyond a memory budget the keeper shares
	// (package keeper/spool); made 0700 if missing. "": every snapshot takes its
	// streams one at a time.
	SpoolDir string
	// ComposeMoments says whether a restore to a moment over live data
	// composes the moment's archive, checked, and composes it again as it
	// restores it, writing nothing of it (ComposeAuto, the default;
	// restore_at_composed.go), or writes the moment's point into the store
	// and restores that (ComposeNever).
	ComposeMoments ComposeMode
	// AsideWarnAfter is the age after which an aside is flagged by
	// list-kept and WarnWaiting: it waits for a person. 0 means
	// DefaultAsideWarnAfter.
	AsideWarnAfter time.Duration
	// OwnStreams are more streams of the keeper's own that no plan may name,
	// beside KV_kept, KEEPER_ACTS and KEEPER_ACTS_<prefix>, which none ever
	// may: the stream of an index bucket with another name (KV_<bucket>),
	// say.
	OwnStreams []string
	// Observer hears the points taken and the restores done, for metrics;
	// nil hears nothing.
	Observer Observer
	// Seal, when set, encrypts every new archive, of points and asides, to
	// its recipients (serve --encrypt-to); nil stores them plain.
	Seal *agecrypt.Sealer
	// Unseal decrypts encrypted archives (serve --identity); nil (or one
	// without identities) cannot restore or fully verify them, and such a
	// request is refused with ErrLocked before anything is touched.
	Unseal *agecrypt.Opener
	// FreeMargin is the room, in bytes, that a snapshot or an aside must
	// leave free on a store that tells its free space (and on the spool's
	// file system), beyond its estimate of the archive (serve
	// --free-margin; diskspace.go says what it covers). 0 means
	// DefaultFreeMargin; a negative value means no margin at all.
	FreeMargin int64
}

// DefaultAsideWarnAfter is how old an aside is when it is flagged.
const DefaultAsideWarnAfter = 14 * 24 * time.Hour

// Keeper runs the verbs. It is safe for concurrent use: verbs on different
// kept data run at once; two verbs that touch the same kept data never
// interleave, the second fails with ErrBusy naming the holder.
type Keeper struct {
	storeView      // the store, its identity and the log
	autoFull  bool // tests: auto picks full for every stream (AutoPicksFull)
	bus       Bus
	index     Index
	acts      Acts
	version   string
	now       func() time.Time
	locks     locks
	stepHook  func(string)
	id        string
	leaseTTL  time.Duration
	parallel  int
	// spoolDir and spools: where and with what memory a snapshot spools
	// the streams it takes at once (package keeper/spool)
	spoolDir string
	compose  bool // a restore to a moment composes its archive (Config.ComposeMoments)
	spools   *spool.Budget
	// asideWarnAfter: asides older than this wait for a person
	asideWarnAfter time.Duration
	// freeMargin: Config.FreeMargin, the default put in, never negative
	freeMargin int64
	// trackedDeletes bounds the deleted sequences a capture tracks per
	// stream (maxTrackedDeletes; tests: SetTrackedDeletes)
	trackedDeletes int
	// evidenceWait bounds the reads of one evidence check (evidenceWait)
	evidenceWait time.Duration
	own          []string         // Config.OwnStreams
	seal         *agecrypt.Sealer // Config.Seal
	// files is held shared by every verb that changes the store and
	// exclusively by Rebuild, so a rebuild never races a discard.
	files sync.RWMutex
	// observe hears what the verbs did; leases counts the leases held.
	observe Observer
	leases  leaseCount
	// waits is the kept data the last round of recovery left waiting
	// (recovery.go).
	waits recoveryWaits
}

// leftoverAge is how old an uncommitted write must be before Sweep removes
// it: older than any verb's write in progress.
const leftoverAge = time.Hour

// New checks that the index belongs to the store, sweeps leftovers of
// writes that never committed, and returns a Keeper.
func New(ctx context.Context, cfg Config) (*Keeper, error) {
	if cfg.Bus == nil || cfg.Index == nil || cfg.Acts == nil || cfg.Store == nil {
		return nil, errors.New("keeper: Store, Bus, Index and Acts are required")
	}
	k := &Keeper{storeView: storeView{store: cfg.Store, log: cfg.Logger}, bus: cfg.Bus, index: cfg.Index, acts: cfg.Acts,
		version: cfg.Version, now: cfg.Now, stepHook: cfg.StepHook, evidenceWait: evidenceWait}
	if k.log == nil {
		k.log = slog.Default()
	}
	k.baseRecord = func(ctx context.Context, module, local string, form int, fp string) ([]byte, error) {
		return k.index.Get(ctx, pointKey(module, local, form, fp))
	}
	if k.now == nil {
		k.now = time.Now
	}
	if k.version == "" {
		k.version = "dev"
	}
	k.observe = cfg.Observer
	k.seal, k.unseal = cfg.Seal, cfg.Unseal
	if k.observe == nil {
		k.observe = nopObserver{}
	}
	k.id, k.leaseTTL = cfg.ID, cfg.LeaseTTL
	if k.id == "" {
		host, _ := os.Hostname()
		var b [3]byte
		rand.Read(b[:])
		k.id = fmt.Sprintf("%s:%d:%x", host, os.Getpid(), b)
	}
	if k.leaseTTL <= 0 {
		k.leaseTTL = DefaultLeaseTTL
	}
	k.parallel = cfg.StreamParallel
	if k.parallel <= 0 {
		k.parallel = DefaultStreamParallel()
	}
	k.parallel = min(k.parallel, MaxStreamParallel)
	if cfg.SpoolDir != "" {
		if err := spool.OpenDir(cfg.SpoolDir); err != nil {
			return nil, fmt.Errorf("keeper: %w", err)
		}
		k.spoolDir, k.spools = cfg.SpoolDir, spool.NewBudget(spool.Memory, spool.Chunk, spool.HeadPatience)
	}
	k.compose = cfg.ComposeMoments == ComposeAuto
	k.own = slices.Clone(cfg.OwnStreams)
	k.freeMargin = cfg.FreeMargin
	k.trackedDeletes = maxTrackedDeletes
	switch {
	case k.freeMargin == 0:
		k.freeMargin = DefaultFreeMargin
	case k.freeMargin < 0:
		k.freeMargin = 0
	}
	k.asideWarnAfter = cfg.AsideWarnAfter
	if k.asideWarnAfter <= 0 {
		k.asideWarnAfter = DefaultAsideWarnAfter
	}
	if err := k.claimStore(ctx); err != nil {
		return nil, fmt.Errorf("keeper: %w", err)
	}
	k.releaseDeadLeases(ctx)
	if err := k.sweepLeftovers(ctx); err != nil {
		return nil, fmt.Errorf("keeper: sweeping leftovers of unfinished writes in %s: %w", k.store.Describe().URL, err)
	}
	return k, nil
}

// sweepLeftovers removes what writes that never committed left in the
// store: the store's own (Sweep), and objects under a point or aside
// prefix that has no record, its commit mark, so holds no point or aside.
// Such leftovers never hold the only copy of anything: live data is removed
// only after its aside's record is written, and an earlier point only after
// it was set aside whole. Leftovers younger than leftoverAge, or of a kept
// data that a keeper (this one or another sharing the store) holds a live
// lease on, may be work in progress (a keeper's, or a copy's), and are left
// alone.
func (k *Keeper) sweepLeftovers(ctx context.Context) error {
	if err := k.store.Sweep(ctx, leftoverAge); err != nil {
		return err
	}
	for _, top := range []string{pointsDir + "/", asideDir + "/"} {
		objs, err := k.store.List(ctx, top)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, o := range objs {
			have[o.Key] = true
		}
		for _, o := range objs {
			rel := path.Dir(o.Key)
			if have[recordKey(rel)] && isRecordPlace(rel) && have[rel+"/"+archiveName] && have[rel+"/"+sealedName] {
				// A point taken again with the other kind of archive, whose
				// keeper stopped before it removed the earlier one (which is
				// set aside whole).
				if err := k.dropOtherArchive(ctx, rel); err != nil {
					return err
				}
			}
			if have[recordKey(rel)] || !isRecordPlace(rel) {
				continue
			}
			if !o.Modified.IsZero() && k.now().Sub(o.Modified) < leftoverAge {
				continue // may be a write in progress: a copy's, or a keeper's whose lease lapsed
			}
			module, local := keptOf(rel)
			if k.leaseLive(ctx, module, local) {
				continue
			}
			k.log.Info("removing a leftover of a write that never committed", "object", k.abs(o.Key))
			if err := k.store.Delete(ctx, o.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropOtherArchive removes the archive at rel that its record does not
// name (bus.tar beside a point of bus.tar.age, or the other way round): the
// earlier point's, left when the point was taken again encrypted or plain.
// That earlier archive was set aside whole before the new one was
// committed, so this removes no only copy; and a plain one must not stay
// beside an encrypted point.
func (k *Keeper) dropOtherArchive(ctx context.Context, rel string) error {
	rec, err := k.readHead(ctx, rel)
	if err != nil {
		return nil // not this sweep's to judge: the record is reported where it is read
	}
	return k.dropOtherArchiveOf(ctx, rel, rec)
}

// dropOtherArchiveOf is dropOtherArchive with the record at rel in hand (a
// point just committed), so it is not read back.
func (k *Keeper) dropOtherArchiveOf(ctx context.Context, rel string, rec *Point) error {
	other := rel + "/" + sealedName
	if rec.Encrypted != nil {
		other = archiveKey(rel)
	}
	if err := k.store.Delete(ctx, other); err != nil {
		return fmt.Errorf("removing %s, which the record beside it does not name: %w", k.abs(other), err)
	}
	return nil
}

// record records an act the verb does not wait for: queued when the
// keeper's Acts is an ActsQueue and the bus does not take it now.
func (k *Keeper) record(ctx context.Context, a Act) error {
	return k.recordAct(ctx, a, false)
}

// recordNow records an act that must be acknowledged by the bus before the
// verb goes on (an intent before a removal): never queued.
func (k *Keeper) recordNow(ctx context.Context, a Act) error {
	return k.recordAct(ctx, a, true)
}

// recordAct makes the act (its id and time) and records it: through the
// queue when the keeper's Acts has one and now is false, else straight to
// the bus.
func (k *Keeper) recordAct(ctx context.Context, a Act, now bool) error {
	a.ID, a.Time = NewActID(), k.now().UTC()
	k.log.Info("act", "id", a.ID, "verb", a.Verb, "module", a.Module, "local", a.Local, "caller", a.Caller,
		"bus_identity", a.BusIdentity.String(), "why", a.Why, "hand", a.Hand, "outcome", a.Outcome, "what", a.What)
	q, queued := k.acts.(ActsQueue)
	var err error
	if queued && !now {
		err = q.Queue(ctx, a)
	} else {
		err = k.acts.Record(ctx, a)
	}
	if err != nil {
		k.log.Error("act not recorded", "id", a.ID, "verb", a.Verb, "err", err)
		return err
	}
	return nil
}

// lock takes module/local for verb: first within this keeper, then across
// keepers through the lease in the index, then the lease of every stream
// the verb may touch (streams), so that kept data whose names collide on
// the bus never interleave. The returned context ends if a lease is lost
// while the verb runs, with errLeaseLost as its cause (leaseLost).
//
// A kept data held by its capture taking a base is waited for, up to
// captureYield, looking every 250 ms: a person's verb does not fail for
// the keeper's own background work.
func (k *Keeper) lock(ctx context.Context, verb string, r Request, streams ...string) (context.Context, func(), error) {
	deadline := time.Now().Add(captureYield)
	for said := false; ; said = true {
		vctx, release, err := k.lockOnce(ctx, verb, r, streams...)
		var c capturing
		if err == nil || r.Caller == captureCaller || !errors.As(err, &c) || time.Now().After(deadline) {
			return vctx, release, err
		}
		if !said {
			k.log.Info("the kept data's capture is taking its base; waiting for it", "verb", verb, "kept", r.Module+"/"+r.Local)
		}
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// captureYield bounds how long a verb waits for a capture's base (a full
// snapshot: some seconds a GiB).
const captureYield = 2 * time.Minute

// lockOnce is one try of lock.
func (k *Keeper) lockOnce(ctx context.Context, verb string, r Request, streams ...string) (context.Context, func(), error) {
	release, err := k.locks.take(r.Module, r.Local, verb, r.Caller, k.now())
	if err != nil {
		return nil, nil, fmt.Errorf("%s refused: %w, so nothing was done", verb, err)
	}
	keys := []string{leaseKey(r.Module, r.Local)}
	for _, s := range streams {
		if key := streamLeaseKey(s); !contains(keys, key) {
			keys = append(keys, key)
		}
	}
	var drops []func()
	dropAll := func() {
		for i := len(drops) - 1; i >= 0; i-- {
			drops[i]()
		}
	}
	vctx, cancel := context.WithCancelCause(ctx)
	for _, key := range keys {
		drop, lost, err := k.takeLease(ctx, key, verb, r)
		if err != nil {
			cancel(nil)
			dropAll()
			release()
			if !errors.Is(err, ErrBusy) {
				err = fmt.Errorf("could not take the lease on %s: %w", leaseName(key), withKind(ErrNoBus, err))
			} else if key != keys[0] {
				err = fmt.Errorf("%s/%s shares its %s on the bus with another kept data: %w", r.Module, r.Local, leaseName(key), err)
			}
			return nil, nil, fmt.Errorf("%s refused: %w, so nothing was done", verb, err)
		}
		drops = append(drops, drop)
		go func() {
			select {
			case <-lost:
				cancel(errLeaseLost)
			case <-vctx.Done():
			}
		}()
	}
	k.files.RLock()
	return vctx, func() {
		k.files.RUnlock()
		cancel(nil)
		dropAll()
		release()
	}, nil
}

// streamsOf is every stream a snapshot or restore (verb) of r may touch:
// the kept data's streams by its plan or the naming rule, and for a
// restore those of the point (or aside) it names, when it can be found. A
// snapshot touches only the live streams: the point it may replace is
// set aside in the store, not on the bus, so its record is not read here.
func (k *Keeper) streamsOf(ctx context.Context, verb string, r Request) ([]string, error) {
	names, _, err := k.candidates(ctx, r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	if verb != VerbRestore || r.AsideOnly || !(r.Fingerprint != "" || r.From != "") {
		return names, nil
	}
	if p, _, err := k.locatePointHead(ctx, r); err == nil {
		for _, s := range p.Streams {
			if !contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	return names, nil
}

// hook calls the configured step hook, used by tests to stop the keeper at
// a chosen step.
func (k *Keeper) hook(step string) {
	if k.stepHook != nil {
		k.stepHook(step)
	}
}
