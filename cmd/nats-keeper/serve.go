package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/internal/embedded"
	"github.com/nats-keeper/nats-keeper/internal/outbox"
	"github.com/nats-keeper/nats-keeper/internal/privdir"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/verbs"
)

type serveOptions struct {
	Conn           connFlags
	Dir            string
	Store          string // where points and asides live; "" is --dir
	StoreFlags     storeFlags
	Prefix         string
	Bucket         string
	Embedded       bool
	Listen         string
	LogFormat      string
	LogLevel       string
	StreamParallel int           // streams of one kept data snapshotted or restored at once; 0: keeper.DefaultStreamParallel()
	Replicas       int           // of the index bucket and acts stream; 0: 3 on a cluster, else 1
	AsideWarnAfter time.Duration // asides older than this are flagged by list and logged once a day
	PruneEvery     time.Duration // apply the recorded retention policies this often; 0: never
	MemoryMiB      int           // soft memory limit for the Go heap, in MiB; 0 leaves it to GOMEMLIMIT
	StopTimeout    time.Duration // how long a stop lets the verbs in flight finish before it cancels them
	MetricsListen  string        // host:port of /metrics and /healthz; "": none
	MaxHeavy       int           // heavy verbs (snapshot, restore, verify) run at once
	InFlightMiB    int           // MiB every snapshot and restore on the connection together have in flight
	VerbTimeout    time.Duration // every verb's server-side deadline
	Seal           sealFlags     // --encrypt-to, --encrypt-to-file, --identity
	ActsQueueMax   int           // acts the on-disk queue holds at most
	ActsQueueMiB   int           // MiB the on-disk queue holds at most
	FreeMargin     sizeFlag      // room a snapshot leaves free on the store's file system beyond its archive
	Err            io.Writer     // logs

	// ready, when set, is called once the service answers (tests).
	ready func(*verbs.Service, string)
}

func newServeCmd(e env) *cobra.Command {
	o := &serveOptions{Err: e.Err, FreeMargin: keeper.DefaultFreeMargin}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the keeper as a NATS micro service answering the verbs",
		Long: `Run the keeper: a NATS micro service named nats-keeper answering
<prefix>.snapshot-kept, restore-kept, discard-aside, list-kept, verify-kept and
prune-kept; with --prune-every, it also applies the recorded retention policies
(nats-keeper policy set) on that schedule.

Connect to an existing NATS with --server (or $NATS_URL, or --context), or run
an in-process nats-server with JetStream with --embedded. SIGINT or SIGTERM
stops taking requests and lets the verbs in flight finish, for at most
--stop-timeout; it exits 0 when they all finished. Verbs still running then are
cancelled, and the keeper exits 1 saying so; a keeper started again finishes or
undoes any restore they left half-way.`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error { return ran(runServe(cmd.Context(), *o)) },
	}
	f := cmd.Flags()
	addConnFlags(f, &o.Conn, e)
	addDomainFlag(f, &o.Conn)
	addDirStoreFlags(f, &o.Dir, &o.Store, &o.StoreFlags, e, "where points and asides live")
	f.StringVar(&o.Prefix, "prefix", verbs.DefaultPrefix, "subject prefix of the verbs")
	f.StringVar(&o.Bucket, "bucket", "kept", "KV bucket of the keeper's index")
	f.BoolVar(&o.Embedded, "embedded", false, "start an in-process nats-server with JetStream, its store under <dir>/nats")
	f.StringVar(&o.Listen, "listen", "127.0.0.1:4222", "where the embedded server listens (with --embedded)")
	f.StringVar(&o.LogFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.IntVar(&o.StreamParallel, "stream-parallel", 0,
		"how many streams of one kept data a snapshot takes and a restore restores at once, on every path; 1 is one at a time "+
			"(0: one per core, at most 4, here "+strconv.Itoa(keeper.DefaultStreamParallel())+")")
	f.IntVar(&o.StreamParallel, "restore-parallel", 0, "the former name of --stream-parallel")
	_ = f.MarkDeprecated("restore-parallel", "use --stream-parallel, which now covers snapshots too")
	f.IntVar(&o.Replicas, "replicas", 0, "replicas of the keeper's index bucket and acts stream (1-5); existing ones with fewer are raised at start "+
		"(0: 3 when the server reports a cluster, 1 where it cannot place 3, else 1)")
	f.DurationVar(&o.PruneEvery, "prune-every", 0,
		"apply the recorded retention policies (nats-keeper policy set) this often; nothing is pruned when none is recorded (0: never)")
	f.DurationVar(&o.AsideWarnAfter, "aside-warn-after", keeper.DefaultAsideWarnAfter,
		"flag a set-aside copy older than this in list, and log it once a day: it waits for a person")
	f.IntVar(&o.MemoryMiB, "memory-limit", defaultMemoryMiB, "soft limit of the keeper's Go heap in MiB, so it stays small on a busy host "+
		"(0: none; $GOMEMLIMIT wins; not applied with --embedded, whose server shares the process)")
	f.DurationVar(&o.StopTimeout, "stop-timeout", verbs.DefaultStopTimeout,
		"on SIGINT or SIGTERM, how long to let the verbs in flight finish before cancelling them (0: the default)")
	f.StringVar(&o.MetricsListen, "metrics-listen", "", "serve Prometheus /metrics and /healthz on this host:port, such as 127.0.0.1:9464 (default: none)")
	f.IntVar(&o.MaxHeavy, "max-heavy", verbs.DefaultMaxHeavy, "how many heavy verbs (snapshot-kept, restore-kept, verify-kept) run at once; "+
		"one more is refused at once with 503 and Retry-After, and list-kept and dry runs never wait behind them")
	f.IntVar(&o.InFlightMiB, "in-flight-mib", 0, "MiB every snapshot and restore on the keeper's connection together may have in flight; "+
		"one that does not fit waits (0: the default, 32 with a directory store and 8 with a nats:// or s3:// store, whose pace a larger window does not change). "+
		"Keep it at most half the server's max_pending (64 MiB by default), or the server drops the connection as a slow consumer")
	o.Seal.addEncrypt(f)
	o.Seal.addIdentity(f, "restoring or fully verifying one needs it, and so does setting live data aside while --encrypt-to is set")
	f.IntVar(&o.ActsQueueMax, "acts-queue-max", outbox.DefaultMaxActs, "how many acts wait at most in <dir>/acts-queue while the bus does not take them; "+
		"one more is dropped, counted in nats_keeper_acts_dropped_total and logged")
	f.IntVar(&o.ActsQueueMiB, "acts-queue-mib", outbox.DefaultMaxBytes>>20, "how many MiB of acts wait at most in <dir>/acts-queue")
	f.DurationVar(&o.VerbTimeout, "verb-timeout", verbs.DefaultVerbTimeout, "every verb's server-side deadline: a verb past it is cancelled, and leaves the data whole")
	f.Var(&o.FreeMargin, "free-margin", "room a snapshot or a set-aside copy must leave free on a directory store's file system (and the spool's), "+
		"beyond the kept data's stored bytes and 5%: it covers the point's record (up to 4 MiB with many consumers), the archive's headers "+
		"and the file system's own blocks, and keeps the volume, often shared with the host, from filling to its last byte; "+
		"one that would not fit is refused before anything is written. A small volume of the keeper's own may take 0 "+
		"(a size: 0, 512KiB, 64MiB)")
	return cmd
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, kept.Errorf(kept.ErrBadRequest, "--log-level %q is not debug, info, warn or error", level)
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, kept.Errorf(kept.ErrBadRequest, "--log-format %q is not text or json", format)
}

// defaultMemoryMiB is --memory-limit's default. The limit is what the Go
// runtime's memory may reach before it collects harder; the process's RSS
// adds the pages of the binary it has touched, 28 MiB with a directory
// store and 31 with an s3:// one (the S3 client's code) at the peak of a
// rollback of 1 GiB. At 40 MiB those peaks were 61-65 MiB on file and
// 65-67 on s3, over the 64 MiB the keeper is held to; at 36 MiB 58.7 and
// 60.3 MiB, for a rollback 1% slower on file and 6% on s3 (BENCHMARKS.md).
const defaultMemoryMiB = 36

func runServe(ctx context.Context, o serveOptions) error {
	log, err := newLogger(o.Err, o.LogFormat, o.LogLevel)
	if err != nil {
		return fmt.Errorf("%w, so nothing is served", err)
	}
	if err := o.check(); err != nil {
		return err
	}
	seal, unseal, err := o.Seal.open()
	if err != nil {
		return kept.Errorf(kept.ErrBadRequest, "%w, so nothing is served", err)
	}
	pd, err := openServeDir(o.Dir)
	if err != nil {
		return err
	}
	dir := pd.Path()
	if o.MemoryMiB > 0 && !o.Embedded && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(o.MemoryMiB) << 20)
	}
	conn := o.Conn
	if o.Embedded {
		s, err := startEmbedded(filepath.Join(dir, "nats"), o.Listen)
		if err != nil {
			return err
		}
		defer func() { s.Shutdown(); s.WaitForShutdown() }()
		conn.Server = s.ClientURL()
		log.Info("embedded nats-server started", "url", s.ClientURL(), "store", filepath.Join(dir, "nats"))
	}
	nc, err := connect(ctx, conn, "nats-keeper serve", log)
	if err != nil {
		return fmt.Errorf("%w; nothing is served", err)
	}
	defer nc.Close()
	st, err := openStore(ctx, o.Store, dir, o.StoreFlags, log)
	if err != nil {
		return fmt.Errorf("%w, so nothing is served", err)
	}
	defer st.Close()
	domain, err := conn.domain()
	if err != nil {
		return err
	}
	svc, err := startKeeper(ctx, nc, o.setup(st, domain, pd, seal, unseal), log, verbs.WithStopTimeout(o.StopTimeout))
	if err != nil {
		return err
	}
	if o.ready != nil {
		o.ready(svc, nc.ConnectedUrl())
	}
	return serveUntilStopped(ctx, nc, svc, log)
}

// check refuses the flags out of their ranges, and a keeper given no NATS
// server to reach, before anything is opened.
func (o serveOptions) check() error {
	if err := verbs.CheckPrefix(o.Prefix); err != nil {
		return kept.Errorf(kept.ErrBadRequest, "--prefix: %w, so nothing is served", err)
	}
	if o.MaxHeavy < 0 || o.MaxHeavy > 64 {
		return kept.Errorf(kept.ErrBadRequest, "--max-heavy %d is not between 1 and 64 (0: the default), so nothing is served", o.MaxHeavy)
	}
	if o.InFlightMiB < 0 || (o.InFlightMiB > 0 && o.InFlightMiB < jsbus.MinInFlight>>20) || o.InFlightMiB > 1024 {
		return kept.Errorf(kept.ErrBadRequest, "--in-flight-mib %d is not between %d and 1024 (0: the default), so nothing is served", o.InFlightMiB, jsbus.MinInFlight>>20)
	}
	if o.VerbTimeout < 0 || (o.VerbTimeout > 0 && o.VerbTimeout < time.Second) {
		return kept.Errorf(kept.ErrBadRequest, "--verb-timeout %s is not at least a second (0: the default), so nothing is served", o.VerbTimeout)
	}
	if !o.Embedded && o.Conn.Server == "" && o.Conn.Context == "" {
		return kept.Errorf(kept.ErrNoBus, "no NATS server given, so nothing is served: pass --server nats://HOST:4222 "+
			"(or set NATS_URL, or --context NAME for a `nats` CLI context), or run `nats-keeper serve --embedded` "+
			"to start a nats-server with JetStream inside the keeper")
	}
	if o.StopTimeout < 0 {
		return kept.Errorf(kept.ErrBadRequest, "--stop-timeout %s is negative, so nothing is served", o.StopTimeout)
	}
	if o.Replicas < 0 || o.Replicas > kept.MaxReplicas {
		return kept.Errorf(kept.ErrBadRequest, "--replicas %d is not between 1 and %d (0: the default), so nothing is served", o.Replicas, kept.MaxReplicas)
	}
	if o.StreamParallel < 0 || o.StreamParallel > keeper.MaxStreamParallel {
		return kept.Errorf(kept.ErrBadRequest, "--stream-parallel %d is not between 1 and %d (0: the default), so nothing is served", o.StreamParallel, keeper.MaxStreamParallel)
	}
	if o.PruneEvery < 0 || (o.PruneEvery > 0 && o.PruneEvery < time.Minute) {
		return kept.Errorf(kept.ErrBadRequest, "--prune-every %s is not 0 (never) or at least a minute, so nothing is served", o.PruneEvery)
	}
	if o.AsideWarnAfter < 0 {
		return kept.Errorf(kept.ErrBadRequest, "--aside-warn-after %s is negative, so nothing is served", o.AsideWarnAfter)
	}
	if o.ActsQueueMax < 0 || o.ActsQueueMax > 1_000_000 {
		return kept.Errorf(kept.ErrBadRequest, "--acts-queue-max %d is not between 1 and 1000000 (0: the default), so nothing is served", o.ActsQueueMax)
	}
	if o.ActsQueueMiB < 0 || o.ActsQueueMiB > 64<<10 {
		return kept.Errorf(kept.ErrBadRequest, "--acts-queue-mib %d is not between 1 and 65536 (0: the default), so nothing is served", o.ActsQueueMiB)
	}
	if o.MemoryMiB < 0 {
		return kept.Errorf(kept.ErrBadRequest, "--memory-limit %d is negative, so nothing is served", o.MemoryMiB)
	}
	return nil
}

// openServeDir opens --dir, the keeper's private directory; a refusal says
// what is wrong with it and how to fix it.
func openServeDir(dir string) (*privdir.Dir, error) {
	pd, err := privdir.Open("--dir", dir)
	if err != nil {
		if rf := (*privdir.Refusal)(nil); errors.As(err, &rf) {
			return nil, kept.Errorf(kept.ErrBadRequest, "%s, so nothing is served: %s", rf.What, rf.Fix)
		}
		return nil, kept.Errorf(kept.ErrBadRequest, "%w, so nothing is served", err)
	}
	return pd, nil
}

// setup is what the flags say of the keeper to start on the store st,
// reaching JetStream in domain, with pd checked before each verb that
// writes.
func (o serveOptions) setup(st store.Store, domain string, pd *privdir.Dir, seal *agecrypt.Sealer, unseal *agecrypt.Opener) keeperSetup {
	dir := pd.Path()
	return keeperSetup{Store: st, Prefix: o.Prefix, Bucket: o.Bucket, JSDomain: domain,
		StreamParallel: o.StreamParallel, AsideWarnAfter: o.AsideWarnAfter, PruneEvery: o.PruneEvery,
		MetricsListen: o.MetricsListen, MaxHeavy: o.MaxHeavy, InFlight: cmp.Or(int64(o.InFlightMiB)<<20, wiring.InFlightFor(o.Store)), VerbTimeout: o.VerbTimeout, Dir: pd, Replicas: o.Replicas,
		Seal: seal, Unseal: unseal, FreeMargin: noneIsNegative(int64(o.FreeMargin)),
		ActsQueue: filepath.Join(dir, "acts-queue"), ActsQueueBounds: outbox.Options{MaxActs: o.ActsQueueMax, MaxBytes: int64(o.ActsQueueMiB) << 20}}
}

// serveUntilStopped serves until a signal (ctx ends) or until the
// connection closes for good, then stops the service: nil when every verb
// in flight finished.
func serveUntilStopped(ctx context.Context, nc *nats.Conn, svc *verbs.Service, log *slog.Logger) error {
	lost := waitStop(ctx, nc)
	stopErr := svc.Stop()
	if lost != nil {
		if stopErr != nil {
			log.Warn("stopping the service", "error", stopErr)
		}
		return lost
	}
	if stopErr != nil {
		return fmt.Errorf("stopped on signal, but not cleanly: %w", stopErr)
	}
	log.Info("stopped on signal; every verb in flight finished")
	return nil
}

// keeperSetup is what startKeeper builds a keeper from; zero fields take
// the defaults.
type keeperSetup struct {
	Store           store.Store
	Prefix          string           // of the verbs; "" is verbs.DefaultPrefix
	Bucket          string           // of the index; "" is kept
	JSDomain        string           // the JetStream domain to reach; "" is the connected server's
	StreamParallel  int              // streams of one kept data snapshotted or restored at once; 0 is keeper.DefaultStreamParallel()
	AsideWarnAfter  time.Duration    // asides older than this are flagged; 0 is keeper.DefaultAsideWarnAfter
	PruneEvery      time.Duration    // apply the recorded retention policies this often; 0: never
	Replicas        int              // of the index bucket and acts stream; 0: the default
	MetricsListen   string           // host:port of /metrics and /healthz; "": none
	MaxHeavy        int              // 0 is verbs.DefaultMaxHeavy
	InFlight        int64            // bytes in flight on the connection; 0 is jsbus.DefaultInFlight
	VerbTimeout     time.Duration    // 0 is verbs.DefaultVerbTimeout
	Dir             *privdir.Dir     // checked before each verb that writes; nil: not checked
	Seal            *agecrypt.Sealer // encrypts new archives; nil: plain
	Unseal          *agecrypt.Opener // decrypts stored ones; nil: none
	ActsQueue       string           // the acts queue's directory; "": none
	ActsQueueBounds outbox.Options
	FreeMargin      int64 // keeper.Config.FreeMargin: 0 is the default, negative none
}

// noneIsNegative turns a margin flag's 0 (no margin) into keeper.Config's
// word for none, a negative value; its 0 is the default.
func noneIsNegative(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// startKeeper starts the keeper on nc and the store through wiring.Start,
// with this binary's version and test hooks; it runs until ctx ends or the
// service is stopped. A failure to open the keeper's state on the bus that
// names no kind of its own wraps kept.ErrNoBus (exit 5).
func startKeeper(ctx context.Context, nc *nats.Conn, ks keeperSetup, log *slog.Logger, opts ...verbs.ServeOption) (*verbs.Service, error) {
	k, err := wiring.Start(ctx, nc, wiring.Setup{Store: ks.Store, Prefix: ks.Prefix, Bucket: ks.Bucket, JSDomain: ks.JSDomain,
		StreamParallel: ks.StreamParallel, AsideWarnAfter: ks.AsideWarnAfter, PruneEvery: ks.PruneEvery,
		MetricsListen: ks.MetricsListen, MaxHeavy: ks.MaxHeavy, InFlight: ks.InFlight, VerbTimeout: ks.VerbTimeout, Dir: ks.Dir, Replicas: ks.Replicas,
		Seal: ks.Seal, Unseal: ks.Unseal, FreeMargin: ks.FreeMargin,
		ActsQueue: ks.ActsQueue, ActsQueueBounds: ks.ActsQueueBounds,
		Version: buildVersion(), Revision: buildRevision(), Logger: log, StepHook: crashHook(log), Now: clockHook(log), ScheduleTick: scheduleTickHook(log),
		Middleware: []verbs.Middleware{hangHook(log)},
		BusError: func(err error) error {
			if kept.KindOf(err) != nil {
				return err
			}
			return kept.Errorf(kept.ErrNoBus, "%w", err)
		}}, opts...)
	if err != nil {
		return nil, err
	}
	return k.Service, nil
}

// waitStop waits for ctx to end (a signal), or for the connection to close
// for good, which it returns as an error.
func waitStop(ctx context.Context, nc *nats.Conn) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if nc.IsClosed() {
				return kept.Errorf(kept.ErrNoBus, "the connection to NATS closed and will not come back; the keeper stopped")
			}
		}
	}
}

// startEmbedded runs a nats-server with JetStream storing under store and
// listening on listen (host:port; port 0 picks a free one).
func startEmbedded(store, listen string) (*server.Server, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, kept.Errorf(kept.ErrBadRequest, "--listen %q is not host:port, so nothing is served", listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, kept.Errorf(kept.ErrBadRequest, "--listen %q has no port 0..65535, so nothing is served", listen)
	}
	if port == 0 {
		port = -1
	} else {
		// The server cannot say "address in use" without a logger; ask first.
		l, err := net.Listen("tcp", net.JoinHostPort(host, portText))
		if err != nil {
			return nil, kept.Errorf(kept.ErrConflict, "cannot listen on %s (%v), so no embedded server was started; pick another address with --listen", listen, err)
		}
		_ = l.Close()
	}
	opts := embedded.Options(store)
	opts.ServerName = "nats-keeper-embedded"
	opts.Host, opts.Port = host, port
	s, err := embedded.Run(opts)
	if err != nil {
		return nil, kept.Errorf(kept.ErrFailed, "the embedded nats-server did not start, so nothing is served: %v", err)
	}
	return s, nil
}
