package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// ServiceName is the micro service's name, as `nats micro ls` shows it.
const ServiceName = "nats-keeper"

// DefaultPrefix is the subject prefix (and micro group) of the verbs.
const DefaultPrefix = "mesh-broker"

// QueueGroup is the queue group every endpoint joins, so that several keepers
// on one bus share the load.
const QueueGroup = "nats-keeper"

// DefaultMaxInFlight bounds the verbs one Service runs at once.
const DefaultMaxInFlight = 16

// Engine is what the service needs of the keeper: its five verbs. *keeper.Keeper
// is one. Each method must be safe for concurrent use and must refuse a second
// verb on the same kept data with an error wrapping keeper.ErrBusy.
type Engine interface {
	SnapshotKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error)
	RestoreKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error)
	DiscardAside(ctx context.Context, r keeper.Request) (*keeper.Reply, error)
	ListKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error)
	VerifyKept(ctx context.Context, r keeper.Request) (*keeper.Reply, error)
}

var _ Engine = (*keeper.Keeper)(nil)

// Option configures Serve or NewClient; each ignores what is not its own.
type Option func(*config)

type config struct {
	prefix      string
	timeout     time.Duration
	version     string
	logger      *slog.Logger
	maxInFlight int
	metadata    map[string]string
}

// WithPrefix sets the subject prefix (default "mesh-broker"), for Serve and
// NewClient.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithTimeout sets how long a Client waits for each reply (default
// DefaultTimeout). A deadline on the context, if earlier, wins.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithVersion sets the version the service announces. A version that is not
// SemVer is announced as 0.0.0-dev, with the given text in the metadata.
func WithVersion(v string) Option { return func(c *config) { c.version = v } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMaxInFlight bounds the verbs run at once (default 16). A request that
// arrives when the bound is reached waits for a verb to finish.
func WithMaxInFlight(n int) Option { return func(c *config) { c.maxInFlight = n } }

// WithMetadata adds metadata to what `nats micro info` shows.
func WithMetadata(k, v string) Option {
	return func(c *config) {
		if c.metadata == nil {
			c.metadata = map[string]string{}
		}
		c.metadata[k] = v
	}
}

// Service is a running nats-keeper service.
type Service struct {
	nc     *nats.Conn
	svc    micro.Service
	engine Engine
	prefix string
	log    *slog.Logger
	slots  chan struct{}
	base   context.Context // verbs run under it: not cancelled by Stop
	done   chan struct{}   // closed by Stop

	mu      sync.Mutex
	stopped bool
	running sync.WaitGroup
	once    sync.Once
	stopErr error
}

// semver is the pattern micro.AddService accepts for a version.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// SemVer returns v without a leading "v" if it is SemVer, else "0.0.0-dev".
func SemVer(v string) string {
	v = strings.TrimPrefix(v, "v")
	if semver.MatchString(v) {
		return v
	}
	return "0.0.0-dev"
}

// Serve starts the nats-keeper micro service on nc for k. Each verb runs in
// its own goroutine, at most WithMaxInFlight at once, under a context that
// carries ctx's values but is not cancelled with it: a verb in flight always
// finishes. When ctx is done the service stops, as Stop does.
func Serve(ctx context.Context, nc *nats.Conn, k *keeper.Keeper, opts ...Option) (*Service, error) {
	if k == nil {
		return nil, errors.New("verbs.Serve needs a keeper, so no service was started")
	}
	return serve(ctx, nc, k, opts...)
}

func serve(ctx context.Context, nc *nats.Conn, e Engine, opts ...Option) (*Service, error) {
	c := config{prefix: DefaultPrefix, maxInFlight: DefaultMaxInFlight}
	for _, o := range opts {
		o(&c)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.maxInFlight < 1 {
		c.maxInFlight = 1
	}
	if err := CheckPrefix(c.prefix); err != nil {
		return nil, fmt.Errorf("%w, so no service was started", err)
	}
	md := map[string]string{"prefix": c.prefix}
	for k, v := range c.metadata {
		md[k] = v
	}
	ver := SemVer(c.version)
	if c.version != "" && ver != strings.TrimPrefix(c.version, "v") {
		md["build"] = c.version
	}
	s := &Service{
		nc: nc, engine: e, prefix: c.prefix, log: c.logger,
		slots: make(chan struct{}, c.maxInFlight),
		base:  context.WithoutCancel(ctx),
		done:  make(chan struct{}),
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     ver,
		Description: "keeps restore points of modules' JetStream data and restores them",
		Metadata:    md,
		QueueGroup:  QueueGroup,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			c.logger.Error("service subscription error", "subject", e.Subject, "error", e.Description)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("could not add the %s micro service, so nothing is served: %w", ServiceName, err)
	}
	s.svc = svc
	g := svc.AddGroup(c.prefix)
	for _, verb := range Verbs {
		if err := g.AddEndpoint(verb, micro.HandlerFunc(s.handler(verb))); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("could not add the endpoint %s.%s, so nothing is served: %w", c.prefix, verb, err)
		}
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Stop()
		case <-s.done:
		}
	}()
	c.logger.Info("serving", "service", ServiceName, "version", ver, "prefix", c.prefix, "max_in_flight", c.maxInFlight)
	return s, nil
}

// Prefix is the subject prefix the service answers on.
func (s *Service) Prefix() string { return s.prefix }

// Info is the micro service's info, as `nats micro info` shows it.
func (s *Service) Info() micro.Info { return s.svc.Info() }

// Stop stops taking requests, then waits for the verbs in flight to finish.
// It is safe to call more than once, and from several goroutines.
func (s *Service) Stop() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		close(s.done)
		s.stopErr = s.svc.Stop()
		s.running.Wait()
		s.log.Info("stopped serving", "prefix", s.prefix)
	})
	return s.stopErr
}

// handler runs one verb per request in its own goroutine, once a slot is free.
func (s *Service) handler(verb string) func(micro.Request) {
	return func(req micro.Request) {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			s.fail(req, verb, fmt.Errorf("%w: this keeper is stopping, so %s was not started; try again", keeper.ErrNoBus, verb))
			return
		}
		s.running.Add(1)
		s.mu.Unlock()
		s.slots <- struct{}{} // wait for a free slot: back-pressure on this endpoint
		go func() {
			defer s.running.Done()
			defer func() { <-s.slots }()
			s.run(verb, req)
		}()
	}
}

func (s *Service) run(verb string, req micro.Request) {
	start := time.Now()
	r, err := DecodeRequest(verb, req.Data())
	if err != nil {
		s.fail(req, verb, err)
		return
	}
	log := s.log.With("verb", verb, "module", r.Module, "local", r.Local, "caller", r.Caller)
	ctx := s.base
	if verb == VerbSnapshot || verb == VerbRestore || verb == VerbVerify {
		p := newProgress(s.nc, s.prefix, r.Module, r.Local)
		ctx = keeper.WithProgress(ctx, func(pr keeper.Progress) { p.publish(pr) })
	}
	reply, err := s.call(ctx, verb, r)
	if err != nil {
		log.Warn("verb failed", "code", keeper.Code(err), "error", err, "took", time.Since(start))
		s.fail(req, verb, err)
		return
	}
	if reply == nil || reply.Said == "" {
		s.fail(req, verb, fmt.Errorf("%w: the keeper gave %s no reply sentence; what it did is in its log and acts", keeper.ErrFailed, verb))
		return
	}
	log.Info("verb done", "said", reply.Said, "took", time.Since(start))
	body, err := json.Marshal(reply)
	if err != nil {
		s.fail(req, verb, fmt.Errorf("%w: %s was done but its reply could not be encoded: %v", keeper.ErrFailed, verb, err))
		return
	}
	if err := req.Respond(body); err != nil {
		log.Error("could not send the reply; the verb was done", "error", err)
	}
}

func (s *Service) call(ctx context.Context, verb string, r keeper.Request) (rep *keeper.Reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s stopped on an internal error (%v); see the keeper's log", keeper.ErrFailed, verb, p)
		}
	}()
	switch verb {
	case VerbSnapshot:
		return s.engine.SnapshotKept(ctx, r)
	case VerbRestore:
		return s.engine.RestoreKept(ctx, r)
	case VerbDiscard:
		return s.engine.DiscardAside(ctx, r)
	case VerbList:
		return s.engine.ListKept(ctx, r)
	case VerbVerify:
		return s.engine.VerifyKept(ctx, r)
	}
	return nil, badRequest(verb, "is not a verb of nats-keeper")
}

// ErrorBody is the JSON body of a failure reply.
type ErrorBody struct {
	Error string `json:"error"`
	Code  int    `json:"code"`
}

func (s *Service) fail(req micro.Request, verb string, err error) {
	code := keeper.Code(err)
	said := err.Error()
	body, _ := json.Marshal(ErrorBody{Error: said, Code: code})
	if rerr := req.Error(strconv.Itoa(code), headerText(said), body); rerr != nil {
		s.log.Error("could not send the error reply", "verb", verb, "error", rerr, "said", said)
	}
}

// headerText makes a sentence safe for a NATS header: one line, bounded.
func headerText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if len(s) > 1024 {
		cut := 1024
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
