// Package keeper is nats-keeper's domain core: restore points, set-aside
// copies, plans, consumer positions, locks and the order of steps that keeps
// every byte of a kept data in at least one complete, verifiable place.
//
// It talks to the bus through Bus, to its index through Index and records acts
// through Acts; it never imports nats.go. The files under Dir are the truth;
// the index can be rebuilt from them (Rebuild).
package keeper

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Config configures a Keeper.
type Config struct {
	Dir     string // the keeper's directory; made 0700 if missing
	Bus     Bus
	Index   Index
	Acts    Acts
	Logger  *slog.Logger     // nil means slog.Default()
	Version string           // the keeper's version, recorded in archives
	Now     func() time.Time // nil means time.Now
	// StepHook, when set, is called at each step of a restore ("journal-written",
	// "remove:<stream>", "removed:<stream>", "restored:<stream>", "positions-set").
	// It exists for crash tests.
	StepHook func(step string)
	// ID names this keeper in leases; empty means host:pid:random.
	ID string
	// LeaseTTL is how long a lease lives unless renewed; 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
}

// Keeper runs the verbs. It is safe for concurrent use: verbs on different
// kept data run at once; two verbs that touch the same kept data never
// interleave, the second fails with ErrBusy naming the holder.
type Keeper struct {
	dir      string
	bus      Bus
	index    Index
	acts     Acts
	log      *slog.Logger
	version  string
	now      func() time.Time
	locks    locks
	stepHook func(string)
	id       string
	leaseTTL time.Duration
	// files is held shared by every verb that changes the files and
	// exclusively by Rebuild, so a rebuild never races a discard.
	files sync.RWMutex
}

// New opens the keeper's directory (making it 0700), removes leftover
// .partial directories and returns a Keeper.
func New(ctx context.Context, cfg Config) (*Keeper, error) {
	if cfg.Bus == nil || cfg.Index == nil || cfg.Acts == nil {
		return nil, errors.New("keeper: Bus, Index and Acts are required")
	}
	if cfg.Dir == "" {
		return nil, errors.New("keeper: Dir is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("keeper: %w", err)
	}
	k := &Keeper{dir: dir, bus: cfg.Bus, index: cfg.Index, acts: cfg.Acts, log: cfg.Logger,
		version: cfg.Version, now: cfg.Now, stepHook: cfg.StepHook}
	if k.log == nil {
		k.log = slog.Default()
	}
	if k.now == nil {
		k.now = time.Now
	}
	if k.version == "" {
		k.version = "dev"
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
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("keeper: make directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("keeper: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("keeper: %s is not a directory (a symlink is never followed)", dir)
	}
	for _, sub := range []string{pointsDir, asideDir} {
		if err := k.mkdirs(sub); err != nil {
			return nil, fmt.Errorf("keeper: %w", err)
		}
	}
	if err := k.claimStore(ctx); err != nil {
		return nil, fmt.Errorf("keeper: %w", err)
	}
	k.releaseDeadLeases(ctx)
	if err := k.cleanPartials(ctx); err != nil {
		return nil, fmt.Errorf("keeper: clean leftover .partial directories: %w", err)
	}
	return k, nil
}

// Dir is the keeper's directory.
func (k *Keeper) Dir() string { return k.dir }

// cleanPartials removes leftover .partial directories: a .partial directory
// never holds the only copy of anything, because live data is removed only
// after its aside was renamed into place, and a point replaces another only by
// an exchange that leaves the new one in place. A partial directory of a kept
// data that another keeper (sharing this directory) holds a live lease on is
// that keeper's work in progress, and is left alone.
func (k *Keeper) cleanPartials(ctx context.Context) error {
	var doomed []string
	modules, err := readDirs(k.abs(pointsDir))
	if err != nil {
		return err
	}
	for _, m := range modules {
		locals, err := readDirs(filepath.Join(k.abs(pointsDir), m))
		if err != nil {
			return err
		}
		for _, l := range locals {
			parts, _ := filepath.Glob(filepath.Join(k.abs(pointsDir), m, l, "*"+partialSuffix))
			if len(parts) > 0 && !k.leaseLive(ctx, m, l) {
				doomed = append(doomed, parts...)
			}
		}
	}
	parts, _ := filepath.Glob(filepath.Join(k.abs(asideDir), "*"+partialSuffix))
	for _, p := range parts {
		m, l, err := ParseAsideID(strings.TrimSuffix(filepath.Base(p), partialSuffix))
		if err == nil && k.leaseLive(ctx, m, l) {
			continue
		}
		doomed = append(doomed, p)
	}
	for _, p := range doomed {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue // never through a symlink
		}
		k.log.Info("removing leftover partial directory", "dir", p)
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

func (k *Keeper) record(ctx context.Context, a Act) error {
	a.Time = k.now().UTC()
	k.log.Info("act", "verb", a.Verb, "module", a.Module, "local", a.Local, "caller", a.Caller,
		"why", a.Why, "hand", a.Hand, "outcome", a.Outcome, "what", a.What)
	if err := k.acts.Record(ctx, a); err != nil {
		k.log.Error("act not recorded", "verb", a.Verb, "err", err)
		return err
	}
	return nil
}

// lock takes module/local for verb: first within this keeper, then across
// keepers through the lease in the index, then the lease of every stream
// the verb may touch (streams), so that kept data whose names collide on
// the bus never interleave. The returned context ends if a lease is lost
// while the verb runs.
func (k *Keeper) lock(ctx context.Context, verb string, r Request, streams ...string) (context.Context, func(), error) {
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
	vctx, cancel := context.WithCancel(ctx)
	for _, key := range keys {
		drop, lost, err := k.takeLease(ctx, key, verb, r)
		if err != nil {
			cancel()
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
				cancel()
			case <-vctx.Done():
			}
		}()
	}
	k.files.RLock()
	return vctx, func() {
		k.files.RUnlock()
		cancel()
		dropAll()
		release()
	}, nil
}

// streamsOf is every stream a snapshot or restore of r may touch: the kept
// data's streams by its plan or the naming rule, and those of the point
// (or aside) a restore names, when it can be found.
func (k *Keeper) streamsOf(ctx context.Context, r Request) ([]string, error) {
	names, _, err := k.candidates(ctx, r.Module, r.Local)
	if err != nil {
		return nil, err
	}
	if r.AsideOnly || !(r.Fingerprint != "" || r.From != "") {
		return names, nil
	}
	if p, _, err := k.locatePoint(r); err == nil {
		for _, s := range p.Streams {
			if !contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	return names, nil
}
