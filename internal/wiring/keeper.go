// Package wiring runs a keeper in this process: it opens the keeper's store
// from a URL, opens the keeper's state on the bus, rebuilds the index,
// serves the verbs, and finishes the restores a stopped keeper left. It is the one
// way to do so, used by `nats-keeper serve`, `nats-keeper demo` and the
// keepertest harness.
//
// It is wiring: it may import every production package of this module (the
// engine, the adapters, the stores, verbs, metrics); only the CLI, keepertest
// and the benchmark import it.
package wiring

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/internal/metrics"
	"github.com/nats-keeper/nats-keeper/internal/outbox"
	"github.com/nats-keeper/nats-keeper/internal/privdir"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// DefaultBucket is the KV bucket of the keeper's index when Setup names none.
const DefaultBucket = "kept"

// RecoverEvery is how often a serving keeper looks for restores that stopped
// half-way (the bus went away mid-restore) and finishes or undoes them.
const RecoverEvery = 15 * time.Second

// Setup is what Start builds a keeper from; zero fields take the defaults.
type Setup struct {
	Store          store.Store   // required; the caller closes it after Stop
	Prefix         string        // of the verbs; "" is verbs.DefaultPrefix
	Bucket         string        // of the index; "" is DefaultBucket
	JSDomain       string        // the JetStream domain of the kept data, the index and the acts; "" is the connected server's (jsbus.WithDomain)
	StreamParallel int           // streams of one kept data snapshotted or restored at once; 0 is keeper.DefaultStreamParallel()
	AsideWarnAfter time.Duration // asides older than this are flagged; 0 is keeper.DefaultAsideWarnAfter
	PruneEvery     time.Duration // apply the recorded retention policies this often; 0: never
	ScheduleTick   time.Duration // look for due scheduled points this often; 0 is DefaultScheduleTick, < 0 never
	CaptureTick    time.Duration // look for kept data to capture this often; 0 is DefaultCaptureTick, < 0 never
	Replicas       int           // of the index bucket and acts stream; 0: 3 on a cluster, else 1 (jsbus.WithReplicas)
	Version        string        // the keeper's version, recorded in archives and announced by the service
	Revision       string        // the VCS revision it was built from, for nats_keeper_build_info; "" when not known
	Logger         *slog.Logger  // nil: slog.Default()
	// StepHook, when set, is called at each restore step (crash tests).
	StepHook func(step string)
	// LeaseTTL is how long the keeper's leases live unless renewed; 0 is
	// kept.DefaultLeaseTTL (tests of a keeper that dies).
	LeaseTTL time.Duration
	// Now, when set, is the keeper's clock (tests of dates); nil is the
	// real one.
	Now func() time.Time
	// Middleware, when set, wraps each verb's handler inside the
	// directory check (test hooks, fault tests); nil serves the keeper
	// itself.
	Middleware []verbs.Middleware
	// BusError, when set, marks the error of opening the keeper's state on
	// the bus (the caller's exit codes); nil leaves it as jsbus returned it.
	BusError func(error) error
	// MetricsListen, when set (host:port; port 0 picks one), serves
	// Prometheus /metrics and /healthz there.
	MetricsListen string
	MaxHeavy      int // heavy verbs run at once; 0 is verbs.DefaultMaxHeavy
	// InFlight bounds the bytes every snapshot and restore on nc together
	// have in flight (jsbus.WithInFlight); 0 is jsbus.DefaultInFlight.
	InFlight    int64
	VerbTimeout time.Duration // every verb's deadline; 0 is verbs.DefaultVerbTimeout
	// FreeMargin is keeper.Config.FreeMargin, the room a snapshot leaves
	// free on the store's file system: 0 is keeper.DefaultFreeMargin, a
	// negative value none.
	FreeMargin int64
	// Dir, when set, is the keeper's private directory: checked to be the
	// same one before each verb that writes (privdir.Dir.Check).
	Dir *privdir.Dir
	// Seal, when set, encrypts every new archive to its recipients
	// (keeper.Config.Seal); Unseal decrypts stored ones (keeper.Config.Unseal).
	Seal   *agecrypt.Sealer
	Unseal *agecrypt.Opener
	// ActsQueue, when set, is the directory of the on-disk acts queue
	// (serve: <dir>/acts-queue): acts the bus does not take now wait
	// there and are delivered in order when it takes them again. "": acts
	// are recorded on the bus or not at all, as a verb ends.
	ActsQueue string
	// ActsQueueBounds bound the acts queue; zero fields take outbox's
	// defaults.
	ActsQueueBounds outbox.Options
}

// Keeper is a keeper serving its verbs in this process.
type Keeper struct {
	Keeper  *keeper.Keeper   // the engine
	Service *verbs.Service   // serving the engine's verbs
	Metrics *metrics.Metrics // its metrics, also in the service's stats

	metricsSrv *metrics.Server // nil without MetricsListen
	queue      *outbox.Queue   // nil without ActsQueue

	cancel context.CancelFunc
	loops  sync.WaitGroup
}

// The keeper is the service's engine: Handle runs every verb of the table.
var _ verbs.Engine = (*keeper.Keeper)(nil)

// Start builds the jsbus adapter and the keeper on nc and s.Store, brings
// the index up to date with the store, and serves the verbs with opts
// (after the setup's prefix, version, logger, the store's URL as metadata,
// its admission bounds and its metrics), and, with MetricsListen, /metrics
// and /healthz. Then, in the background, it finishes or undoes the
// restores a stopped keeper left, at once and again every RecoverEvery
// until ctx ends or Stop is called: a kept data with an unfinished restore
// refuses its verbs until recovery is done with it (keeper.Recover), and
// one whose recovery cannot finish now waits, logged, in the metrics and
// in /healthz, without holding back any other. With PruneEvery it also
// applies the recorded retention policies. Start fails only for what stops
// the whole keeper (no bus, no store, an index of another store), each
// failure a sentence ending "so nothing is served".
func Start(ctx context.Context, nc *nats.Conn, s Setup, opts ...verbs.ServeOption) (*Keeper, error) {
	if s.Store == nil {
		return nil, errors.New("wiring.Start needs a store, so nothing is served")
	}
	prefix, bucket, log := s.defaults()
	where := s.Store.Describe().URL
	// Listen first, so a taken address fails before anything is done; the
	// health check answers 503 until the keeper is made.
	m := metrics.New(log)
	m.Build(verbs.SemVer(s.Version), s.Revision)
	var made atomic.Pointer[keeper.Keeper]
	var msrv *metrics.Server
	if s.MetricsListen != "" {
		var err error
		if msrv, err = m.Listen(s.MetricsListen, health(nc, &made)); err != nil {
			return nil, fmt.Errorf("%w, so nothing is served; pick another address with --metrics-listen", err)
		}
	}
	ok := false
	defer func() {
		if !ok && msrv != nil {
			_ = msrv.Close()
		}
	}()
	k, queue, err := engine(ctx, nc, s, bucket, prefix, log, m, "nothing is served")
	if err != nil {
		return nil, err
	}
	defer func() {
		if !ok && queue != nil {
			_ = queue.Close()
		}
	}()
	written, removed, err := k.Rebuild(ctx)
	if err != nil {
		return nil, fmt.Errorf("could not bring the index %s up to date with the store %s, so nothing is served: %w", bucket, where, err)
	}
	log.Info("index rebuilt from the store", "store", where, "written", written, "removed", removed)
	m.Watch(k)
	made.Store(k)
	var guard verbs.Middleware // the directory check, outermost
	if s.Dir != nil {
		guard = dirGuard(s.Dir)
	}
	opts = append([]verbs.ServeOption{verbs.WithMiddleware(append([]verbs.Middleware{guard}, s.Middleware...)...), verbs.WithPrefix(prefix), verbs.WithVersion(s.Version), verbs.WithIndexBucket(bucket),
		verbs.WithLogger(log), verbs.WithMetadata("store", where),
		verbs.WithMaxHeavy(s.MaxHeavy), verbs.WithVerbTimeout(s.VerbTimeout),
		verbs.WithObserver(m.Answered), verbs.WithStatsData(m.StatsData)}, append(peerOptions(nc, prefix, s.JSDomain, bucket, log), opts...)...)
	svc, err := verbs.Serve(ctx, nc, k, opts...)
	if err != nil {
		return nil, err
	}
	ok = true
	loopCtx, cancel := context.WithCancel(ctx)
	ik := &Keeper{Keeper: k, Service: svc, Metrics: m, metricsSrv: msrv, queue: queue, cancel: cancel}
	ik.loops.Go(func() { recoverLoop(loopCtx, k, log) })
	if s.PruneEvery > 0 {
		ik.loops.Go(func() { pruneLoop(loopCtx, k, s.PruneEvery, log) })
	}
	if s.ScheduleTick >= 0 {
		ik.loops.Go(func() { scheduleLoop(loopCtx, k, cmp.Or(s.ScheduleTick, DefaultScheduleTick), m.Schedules(), log) })
	}
	if s.CaptureTick >= 0 {
		ik.loops.Go(func() { captureLoop(loopCtx, k, cmp.Or(s.CaptureTick, DefaultCaptureTick), log) })
	}
	return ik, nil
}

// defaults are the setup's prefix, bucket and logger, or their defaults.
func (s Setup) defaults() (prefix, bucket string, log *slog.Logger) {
	prefix, bucket, log = s.Prefix, s.Bucket, s.Logger
	if prefix == "" {
		prefix = verbs.DefaultPrefix
	}
	if bucket == "" {
		bucket = DefaultBucket
	}
	if log == nil {
		log = slog.Default()
	}
	return prefix, bucket, log
}

// Open builds the keeper on nc and s.Store without serving it: the jsbus
// adapter (the keeper's index, acts and leases on the bus) and the engine,
// which checks that the index belongs to the store and sweeps what
// unfinished writes left. It recovers no restore and rebuilds no index:
// that is a serving keeper's work. It is for commands that do one verb in
// their own process beside the store (nats-keeper import), sharing the
// store and the bus with serving keepers as keepers do, through leases.
func Open(ctx context.Context, nc *nats.Conn, s Setup) (*keeper.Keeper, error) {
	if s.Store == nil {
		return nil, errors.New("wiring.Open needs a store, so nothing was done")
	}
	prefix, bucket, log := s.defaults()
	s.ActsQueue = "" // one verb in this process: its act is recorded on the bus or the verb says why not
	k, _, err := engine(ctx, nc, s, bucket, prefix, log, nil, "nothing was done")
	return k, err
}

// engine builds the jsbus adapter, the acts queue in front of it when
// s.ActsQueue is set (nil otherwise; the caller closes it), and the keeper
// on them; each failure is a sentence ending ", so "+nothing.
func engine(ctx context.Context, nc *nats.Conn, s Setup, bucket, prefix string, log *slog.Logger, obs keeper.Observer, nothing string) (*keeper.Keeper, *outbox.Queue, error) {
	a, err := jsbus.New(ctx, nc, jsbus.WithBucket(bucket), jsbus.WithPrefix(prefix), jsbus.WithLogger(log), jsbus.WithReplicas(s.Replicas), jsbus.WithDomain(s.JSDomain),
		jsbus.WithInFlight(cmp.Or(s.InFlight, jsbus.DefaultInFlight)))
	if err != nil {
		if s.BusError != nil {
			err = s.BusError(err)
		}
		return nil, nil, fmt.Errorf("could not open the keeper's state on the bus, so %s: %w", nothing, err)
	}
	var acts keeper.Acts = a
	var queue *outbox.Queue
	if s.ActsQueue != "" {
		qo := s.ActsQueueBounds
		qo.Logger = log
		if queue, err = outbox.Open(s.ActsQueue, a, qo); err != nil {
			return nil, nil, fmt.Errorf("could not open the acts queue, so %s: %w", nothing, err)
		}
		acts = queue
	}
	k, err := keeper.New(ctx, keeper.Config{Store: s.Store, Bus: a, Index: a, Acts: acts, Logger: log, Version: s.Version,
		StepHook: s.StepHook, LeaseTTL: s.LeaseTTL, Now: s.Now, StreamParallel: s.StreamParallel, SpoolDir: spoolDir(s.Dir), AsideWarnAfter: s.AsideWarnAfter,
		OwnStreams: a.OwnStreams(), Observer: obs, Seal: s.Seal, Unseal: s.Unseal, FreeMargin: s.FreeMargin})
	if err != nil {
		if queue != nil {
			_ = queue.Close()
		}
		return nil, nil, fmt.Errorf("could not open the keeper's store %s, so %s: %w", s.Store.Describe().URL, nothing, err)
	}
	return k, queue, nil
}

// spoolDir is <dir>/spool, where a snapshot spools the streams it takes at
// once (keeper.Config.SpoolDir); "" without a private directory.
func spoolDir(d *privdir.Dir) string {
	if d == nil {
		return ""
	}
	return filepath.Join(d.Path(), "spool")
}

// Stop stops the service, as verbs.Service.Stop does, then ends the
// background loops and waits for them. It returns the service's Stop error.
func (k *Keeper) Stop() error {
	err := k.Service.Stop()
	k.cancel()
	k.loops.Wait()
	if k.queue != nil {
		_ = k.queue.Close() // what it holds stays on disk for the next start
	}
	if k.metricsSrv != nil {
		_ = k.metricsSrv.Close()
	}
	return err
}

// MetricsAddr is where /metrics and /healthz are served, or "" without
// MetricsListen.
func (k *Keeper) MetricsAddr() string {
	if k.metricsSrv == nil {
		return ""
	}
	return k.metricsSrv.Addr()
}

// health is /healthz's check: the connection to the bus is up, the index
// answers and the store is reachable. The kept data waiting for recovery
// do not fail it (the metrics' handler names them).
func health(nc *nats.Conn, made *atomic.Pointer[keeper.Keeper]) func(context.Context) error {
	return func(ctx context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("the keeper is not connected to the bus (its connection is %s)", nc.Status())
		}
		k := made.Load()
		if k == nil {
			return errors.New("the keeper is starting: it opens its state and its store, and brings its index up to date")
		}
		return k.Health(ctx)
	}
}

// pruneLoop applies the recorded retention policies every period.
func pruneLoop(ctx context.Context, k *keeper.Keeper, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rep, err := k.PruneRecorded(ctx)
			switch {
			case err != nil:
				log.Error("the scheduled prune failed", "err", err)
			case rep != nil:
				log.Info("the scheduled prune ran", "said", rep.Said)
			}
		}
	}
}

// recoverLoop runs a round of recovery at once, then every RecoverEvery,
// and warns daily of asides that wait for a person. Each round logs what
// it finished or undid; the keeper logs what waits (keeper.Recover).
func recoverLoop(ctx context.Context, k *keeper.Keeper, log *slog.Logger) {
	t := time.NewTicker(RecoverEvery)
	defer t.Stop()
	daily := time.NewTicker(24 * time.Hour)
	defer daily.Stop()
	recoverRound(ctx, k, log)
	k.WarnWaiting(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-daily.C:
			k.WarnWaiting(ctx)
		case <-t.C:
			recoverRound(ctx, k, log)
		}
	}
}

// recoverRound runs one round of recovery and logs what it did.
func recoverRound(ctx context.Context, k *keeper.Keeper, log *slog.Logger) {
	rec, err := k.Recover(ctx)
	for _, s := range rec.Said() {
		log.Warn("recovered an interrupted restore", "said", s)
	}
	if err != nil && ctx.Err() == nil {
		log.Error("recovering interrupted restores: the restore journals could not be listed; the next round tries again", "err", err)
	}
}
