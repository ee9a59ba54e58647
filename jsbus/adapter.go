// Package jsbus is the keeper's JetStream adapter: it implements keeper.Bus
// on nats.go's JetStream API, with its own clients of the server's snapshot
// and restore protocols (snapshot.go, restore.go: the same protocols as
// jsm.go's SnapshotToBuffer and RestoreSnapshotFromBuffer, which it does not
// call, with bounded memory and a retried first restore chunk; jsm.go lends
// only its API types and, for Connect, its `nats` context loader),
// keeper.Index on the `kept` KV bucket, and keeper.Acts on the KEEPER_ACTS
// stream. It assumes nothing about the number of servers: snapshots are
// answered by the stream's leader and restores keep the replicas and placement
// of the archived configuration.
//
// It may import keeper (the ports it implements), kept and internal/jsretry,
// besides nats.go and jsm.go; the engine never imports it.
package jsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

var (
	_ keeper.Bus   = (*Adapter)(nil)
	_ keeper.Index = (*Adapter)(nil)
	_ keeper.Acts  = (*Adapter)(nil)
)

// Defaults of the options.
const (
	DefaultBucket     = "kept"
	DefaultActsStream = "KEEPER_ACTS"
	DefaultPrefix     = "mesh-broker"
	DefaultTimeout    = 30 * time.Second // one JetStream API request or restore chunk
	DefaultStall      = 60 * time.Second // a snapshot that sends nothing for this long is abandoned
)

// Limits of what the adapter makes.
const (
	actsMaxBytes   = 256 << 20 // the acts stream keeps the newest 256 MiB of acts
	actsMaxMsgSize = 1 << 20
	// ActsDuplicates is the acts stream's duplicate window: a message id
	// (an act's id) seen within it is stored once. An act is published
	// again when its acknowledgement was lost (a leader died after storing
	// it) and it waited in the keeper's queue, or when the keeper stopped
	// between the acknowledgement and taking it off the queue and starts
	// again later. A day covers a bus away overnight and a keeper started
	// again the next morning; the server keeps one small entry per act in
	// the window, and acts are few (one or two per verb), so a day costs
	// kilobytes. `nats-keeper acts` also shows an id once, should a replay
	// come later still.
	ActsDuplicates   = 24 * time.Hour
	indexMaxValue    = 1 << 20
	maxMetaSize      = 16 << 20 // backup.json
	maxChunk         = 8 << 20  // a restore chunk: the max payload, up to this
	maxKeys          = 1_000_000
	maxListResponses = 100_000 // pages of a consumer list, a bound against a misbehaving server
)

// Adapter is one connection's view of the bus, the index and the acts stream.
// It is safe for concurrent use.
type Adapter struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	cfg     options
	log     *slog.Logger
	actsSub string // <prefix>.acts
	// flights bounds the bytes all snapshots and restores on nc have in
	// flight together (WithInFlight).
	flights *budget
	// census keeps the streams that may hold a consumer, from the
	// server's advisories, so that a census need not list every stream
	// (Census).
	census *censusWatch
	// starts is held (a token taken) while a restore begins and over a
	// stream's removal (see restoresatonce.go).
	starts chan struct{}
	// restoring counts the restores in flight, for lane.
	restoring atomic.Int32
	// markers are the delete markers of the leases it released (Create).
	markers markers
}

type options struct {
	bucket   string
	acts     string
	prefix   string
	domain   string // WithDomain
	replicas int
	timeout  time.Duration
	attempt  time.Duration
	stall    time.Duration
	inFlight int64
	log      *slog.Logger
}

// Option configures New.
type Option func(*options)

// WithBucket names the index KV bucket (default "kept").
func WithBucket(name string) Option { return func(o *options) { o.bucket = name } }

// WithActsStream names the acts stream (default "KEEPER_ACTS" with the
// default prefix, else ActsStreamFor(prefix)).
func WithActsStream(name string) Option { return func(o *options) { o.acts = name } }

// WithPrefix sets the subject prefix; acts go to <prefix>.acts.<verb>
// (default "mesh-broker").
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithReplicas sets the replicas of the index bucket and the acts stream:
// New creates them with n, and raises existing ones with fewer to n. The
// default, 0, asks for 3 when the connection reports a cluster (1 where the
// servers cannot place 3), else 1.
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// withTimeout bounds each JetStream API request and each restore chunk's
// acknowledgement (default DefaultTimeout); tests shorten it.
func withTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithStallTimeout abandons a snapshot when the server sends nothing for d
// (default 60s).
func WithStallTimeout(d time.Duration) Option { return func(o *options) { o.stall = d } }

// ActsStreamFor is the acts stream of a keeper with prefix: KEEPER_ACTS for
// the default prefix, KEEPER_ACTS_<prefix, dots as _> for another, so that
// keepers with their own index and prefix on one bus keep their acts apart.
func ActsStreamFor(prefix string) string {
	if prefix == DefaultPrefix {
		return DefaultActsStream
	}
	return DefaultActsStream + "_" + strings.ReplaceAll(prefix, ".", "_")
}

// New makes the adapter on nc, creating the index bucket and the acts stream
// when they are missing. An existing acts stream must take <prefix>.acts.>.
func New(ctx context.Context, nc *nats.Conn, opts ...Option) (*Adapter, error) {
	o := options{bucket: DefaultBucket, prefix: DefaultPrefix,
		timeout: DefaultTimeout, attempt: DefaultAttemptTimeout, stall: DefaultStall, inFlight: DefaultInFlight}
	for _, fn := range opts {
		fn(&o)
	}
	if o.acts == "" {
		o.acts = ActsStreamFor(o.prefix)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if nc == nil {
		return nil, errors.New("jsbus: no NATS connection was given, so the adapter was not made")
	}
	if !validName(o.bucket) || !validName(o.acts) || !validPrefix(o.prefix) {
		return nil, fmt.Errorf("jsbus: bucket %q, acts stream %q or prefix %q is not a valid name, so the adapter was not made: %w",
			o.bucket, o.acts, o.prefix, keeper.ErrBadRequest)
	}
	if o.replicas < 0 || o.replicas > 5 || o.timeout <= 0 || o.stall <= 0 || o.attempt <= 0 {
		return nil, fmt.Errorf("jsbus: replicas %d, timeout %s or stall %s out of range, so the adapter was not made: %w",
			o.replicas, o.timeout, o.stall, keeper.ErrBadRequest)
	}
	if o.inFlight < MinInFlight {
		return nil, fmt.Errorf("jsbus: an in-flight budget of %d bytes is less than the %d one restore chunk needs, so the adapter was not made: %w",
			o.inFlight, MinInFlight, keeper.ErrBadRequest)
	}
	if !validDomain(o.domain) {
		return nil, fmt.Errorf("jsbus: JetStream domain %q is not a valid name, so the adapter was not made: %w", o.domain, keeper.ErrBadRequest)
	}
	var js jetstream.JetStream
	var err error
	if o.domain != "" {
		js, err = jetstream.NewWithDomain(nc, o.domain, jetstream.WithDefaultTimeout(o.timeout))
	} else {
		js, err = jetstream.New(nc, jetstream.WithDefaultTimeout(o.timeout))
	}
	if err != nil {
		return nil, fmt.Errorf("jsbus: open JetStream: %w", err)
	}
	a := &Adapter{nc: nc, js: js, cfg: o, log: o.log, actsSub: o.prefix + ".acts", flights: newBudget(o.inFlight),
		starts: make(chan struct{}, 1)}
	if a.kv, err = a.ensureBucket(ctx); err != nil {
		return nil, err
	}
	if err := a.ensureActs(ctx); err != nil {
		return nil, err
	}
	a.census = a.watchCensus()
	return a, nil
}

func (a *Adapter) ensureBucket(ctx context.Context) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := a.retry(ctx, "open the index bucket", func(ctx context.Context) (err error) {
		kv, err = a.js.KeyValue(ctx, a.cfg.bucket)
		return err
	})
	if err == nil {
		return kv, a.raiseReplicas(ctx, "KV_"+a.cfg.bucket)
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, busErr(fmt.Errorf("jsbus: open the index bucket %s: %w", a.cfg.bucket, err))
	}
	replicas, err := a.placeReplicas(ctx, "the index bucket", func(ctx context.Context, replicas int) (err error) {
		kv, err = a.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: a.cfg.bucket, Description: "nats-keeper index of restore points, asides and plans",
			History: 5, MaxValueSize: indexMaxValue, Storage: jetstream.FileStorage, Replicas: replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) { // made by another keeper meanwhile
			kv, err = a.js.KeyValue(ctx, a.cfg.bucket)
		}
		return err
	})
	if err != nil {
		return nil, busErr(fmt.Errorf("jsbus: create the index bucket %s: %w", a.cfg.bucket, err))
	}
	a.log.Info("created the index bucket", "bucket", a.cfg.bucket, "replicas", replicas)
	return kv, nil
}

func (a *Adapter) ensureActs(ctx context.Context) error {
	subject := a.actsSub + ".>"
	var s jetstream.Stream
	err := a.retry(ctx, "look up the acts stream", func(ctx context.Context) (err error) {
		s, err = a.js.Stream(ctx, a.cfg.acts)
		return err
	})
	if err == nil {
		for _, subj := range s.CachedInfo().Config.Subjects {
			if subj == subject || subj == ">" || (strings.HasSuffix(subj, ".>") && strings.HasPrefix(subject, strings.TrimSuffix(subj, ">"))) {
				if err := a.raiseDuplicates(ctx, s.CachedInfo().Config); err != nil {
					return err
				}
				return a.raiseReplicas(ctx, a.cfg.acts)
			}
		}
		return fmt.Errorf("jsbus: stream %s exists but does not take %s, so acts would not be stored: %w",
			a.cfg.acts, subject, keeper.ErrConflict)
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return busErr(fmt.Errorf("jsbus: look up the acts stream %s: %w", a.cfg.acts, err))
	}
	replicas, err := a.placeReplicas(ctx, "the acts stream", func(ctx context.Context, replicas int) error {
		_, err := a.js.CreateStream(ctx, jetstream.StreamConfig{
			Name: a.cfg.acts, Description: "nats-keeper acts: what the keeper did, who asked and why",
			Subjects: []string{subject}, Storage: jetstream.FileStorage, Replicas: replicas,
			Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
			MaxBytes: actsMaxBytes, MaxMsgSize: actsMaxMsgSize, Duplicates: ActsDuplicates,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) { // made by another keeper meanwhile
			err = nil
		}
		return err
	})
	if err != nil {
		return busErr(fmt.Errorf("jsbus: create the acts stream %s: %w", a.cfg.acts, err))
	}
	a.log.Info("created the acts stream", "stream", a.cfg.acts, "subjects", subject, "replicas", replicas)
	return nil
}

// raiseDuplicates widens the duplicate window of an existing acts stream
// to ActsDuplicates (one made by an older keeper has 2 minutes), with a
// stream config update, and logs it. A wider window is left alone, and so
// is one the stream's MaxAge bounds (the server refuses a window longer
// than the stream keeps messages), with a warning.
func (a *Adapter) raiseDuplicates(ctx context.Context, cfg jetstream.StreamConfig) error {
	if cfg.Duplicates >= ActsDuplicates {
		return nil
	}
	if cfg.MaxAge > 0 && cfg.MaxAge < ActsDuplicates {
		a.log.Warn("the acts stream keeps acts for less than the duplicate window the keeper wants; a replayed act may be stored twice",
			"stream", cfg.Name, "max_age", cfg.MaxAge, "duplicates", cfg.Duplicates, "want", ActsDuplicates)
		return nil
	}
	had := cfg.Duplicates
	cfg.Duplicates = ActsDuplicates
	err := a.retry(ctx, "widen the duplicate window of "+cfg.Name, func(ctx context.Context) error {
		_, err := a.js.UpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return busErr(fmt.Errorf("jsbus: widen the duplicate window of the acts stream %s from %s to %s, so acts replayed from the keeper's queue could be stored twice: %w",
			cfg.Name, had, ActsDuplicates, err))
	}
	a.log.Info("widened the duplicate window of the acts stream", "stream", cfg.Name, "from", had, "to", ActsDuplicates)
	return nil
}

// OwnStreams are the streams the adapter keeps for the keeper: its index
// bucket's (KV_<bucket>) and its acts stream. They are what
// keeper.Config.OwnStreams wants, so that no plan names them.
func (a *Adapter) OwnStreams() []string { return []string{"KV_" + a.cfg.bucket, a.cfg.acts} }

// ServerVersion is the version of the server the connection is on.
func (a *Adapter) ServerVersion() string { return a.nc.ConnectedServerVersion() }

// validName reports whether s can be a stream, consumer or bucket name and a
// single subject token: keeper.CheckStreamName, the one rule for such names.
func validName(s string) bool { return keeper.CheckStreamName("name", s) == nil }

func validPrefix(p string) bool { return validTokens(p, 255) }

// validTokens reports whether s, at most max bytes, is dot-separated
// subject tokens: none empty, none with a space or a wildcard.
func validTokens(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, t := range strings.Split(s, ".") {
		if t == "" || strings.ContainsAny(t, " *>\t\r\n\x00") {
			return false
		}
	}
	return true
}

// busErr marks errors that mean the bus could not be reached with
// keeper.ErrNoBus, unless they already carry a keeper sentinel.
func busErr(err error) error {
	if err == nil {
		return nil
	}
	if keeper.KindOf(err) != nil || errors.Is(err, keeper.ErrNoStream) {
		return err
	}
	for _, s := range []error{nats.ErrConnectionClosed, nats.ErrNoServers, nats.ErrConnectionDraining,
		nats.ErrNoResponders, jetstream.ErrJetStreamNotEnabled, jetstream.ErrJetStreamNotEnabledForAccount,
		nats.ErrJetStreamNotEnabled} {
		if errors.Is(err, s) {
			return fmt.Errorf("%w: %w", err, keeper.ErrNoBus)
		}
	}
	return err
}
