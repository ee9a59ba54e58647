package verbs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/kept"
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

// DefaultStopTimeout is how long Stop waits for the verbs in flight before it
// cancels them.
const DefaultStopTimeout = time.Minute

// cutWait is how long Stop waits, after cancelling the verbs still running,
// for them to end before it returns without them.
const cutWait = 10 * time.Second

const description = "keeps restore points of modules' JetStream data and restores them"

// ServeOption configures Serve.
type ServeOption interface{ applyServe(*serveConfig) }

// ClientOption configures NewClient.
type ClientOption interface{ applyClient(*clientConfig) }

type serveConfig struct {
	prefix      string
	version     string
	logger      *slog.Logger
	maxInFlight int
	metadata    map[string]string
	stopTimeout time.Duration
	maxHeavy    int
	verbTimeout time.Duration
	observe     func(verb string, code int, took time.Duration)
	statsData   func(verb string) map[string]any
	indexBucket string
	middleware  []Middleware
}

type clientConfig struct {
	prefix       string
	timeout      time.Duration
	wait         time.Duration
	recoveryWait time.Duration
}

type serveOption func(*serveConfig)

func (o serveOption) applyServe(c *serveConfig) { o(c) }

type clientOption func(*clientConfig)

func (o clientOption) applyClient(c *clientConfig) { o(c) }

// PrefixOption is WithPrefix's option, the one that both Serve and
// NewClient take: a service and its clients must agree on the prefix.
type PrefixOption string

func (p PrefixOption) applyServe(c *serveConfig)   { c.prefix = string(p) }
func (p PrefixOption) applyClient(c *clientConfig) { c.prefix = string(p) }

// WithPrefix sets the subject prefix of the verbs (default DefaultPrefix,
// "mesh-broker"), for Serve and NewClient alike.
func WithPrefix(p string) PrefixOption { return PrefixOption(p) }

// WithTimeout sets how long a Client waits for each reply (default
// DefaultTimeout; 0 or less: the default). A deadline on the context, if
// earlier, wins.
func WithTimeout(d time.Duration) ClientOption {
	return clientOption(func(c *clientConfig) { c.timeout = d })
}

// WithNoResponderWait makes a Client send a request again, for up to d,
// while no keeper is subscribed to its subject (the server answers "no
// responders"): as for a few seconds while the keepers reconnect after
// their server died. Such a request reached no keeper, so sending it again
// cannot do a verb twice. The waits between tries grow from 100ms to 2s.
// The default, 0, fails at once. A request that got no reply at all is not
// sent again: it may have reached a keeper (see Client).
func WithNoResponderWait(d time.Duration) ClientOption {
	return clientOption(func(c *clientConfig) { c.wait = max(d, 0) })
}

// WithVersion sets the version the service announces. A version that is not
// SemVer is announced as 0.0.0-dev, with the given text in the metadata.
func WithVersion(v string) ServeOption { return serveOption(func(c *serveConfig) { c.version = v }) }

// WithLogger sets the service's logger (default slog.Default()).
func WithLogger(l *slog.Logger) ServeOption {
	return serveOption(func(c *serveConfig) { c.logger = l })
}

// WithMaxInFlight bounds the verbs other than heavy ones (WithMaxHeavy) run
// at once (default DefaultMaxInFlight; less than 1: 1). A request that
// arrives when the bound is reached waits for one of them to finish.
func WithMaxInFlight(n int) ServeOption {
	return serveOption(func(c *serveConfig) { c.maxInFlight = n })
}

// WithStopTimeout sets how long Stop lets the verbs in flight finish before it
// cancels their context (default DefaultStopTimeout; 0 or less: the default).
func WithStopTimeout(d time.Duration) ServeOption {
	return serveOption(func(c *serveConfig) { c.stopTimeout = d })
}

// WithMetadata adds one key and value to the metadata `nats micro info`
// shows. The key "prefix" is the service's own and cannot be replaced.
func WithMetadata(k, v string) ServeOption {
	return serveOption(func(c *serveConfig) {
		if c.metadata == nil {
			c.metadata = map[string]string{}
		}
		c.metadata[k] = v
	})
}

// Service is a running nats-keeper service.
type Service struct {
	nc          *nats.Conn
	handlers    map[string]Handler // each verb's, built from the table (handler.go)
	prefix      string
	log         *slog.Logger
	slots       chan struct{}
	heavy       chan struct{} // a slot per heavy verb running (WithMaxHeavy)
	verbTimeout time.Duration
	observe     func(verb string, code int, took time.Duration)
	statsData   func(verb string) map[string]any
	indexBucket string          // named in beats (WithIndexBucket)
	base        context.Context // verbs run under it: cancelled by Stop after the grace
	cancel      context.CancelFunc
	done        chan struct{} // closed by Stop
	stopTimeout time.Duration

	id       string
	own      kept.BusIdentity // the keeper's own connection, for requests the bus gave no identity
	version  string
	metadata map[string]string
	started  time.Time
	// endpoints and control are set before the first request can arrive and
	// never change afterwards.
	endpoints []*endpoint
	control   []*nats.Subscription
	unknown   *nats.Subscription // <prefix>.*: requests for no verb (unknown.go)

	mu      sync.Mutex
	stopped bool
	flights map[*flight]struct{}
	running sync.WaitGroup
	once    sync.Once
	stopErr error
}

// flight is one verb in flight, for Stop's log.
type flight struct {
	verb, module, local, caller string
	since                       time.Time
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

// Serve starts the nats-keeper service on nc for e (a *keeper.Keeper, or
// any Engine): one endpoint per verb on <prefix>.<verb> in the queue group
// nats-keeper, and the micro discovery protocol, so that `nats micro
// ls/info/stats/ping` see it. Each verb runs in its own goroutine, at most
// WithMaxInFlight at once, under a context that carries ctx's values but is
// not cancelled with it: Stop cancels it only after WithStopTimeout. When
// ctx is done the service stops, as Stop does. An error means nothing is
// served.
func Serve(ctx context.Context, nc *nats.Conn, e Engine, opts ...ServeOption) (*Service, error) {
	if v := reflect.ValueOf(e); e == nil || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return nil, errors.New("verbs.Serve needs an engine, such as a *keeper.Keeper, so no service was started")
	}
	c := newServeConfig(opts)
	if err := CheckPrefix(c.prefix); err != nil {
		return nil, fmt.Errorf("%w, so no service was started", err)
	}
	if nc == nil || nc.IsClosed() {
		return nil, fmt.Errorf("%w: the connection to NATS is closed, so no service was started", kept.ErrNoBus)
	}
	md := map[string]string{}
	for k, v := range c.metadata {
		md[k] = v
	}
	md["prefix"] = c.prefix
	ver := SemVer(c.version)
	if c.version != "" && ver != strings.TrimPrefix(c.version, "v") {
		md["build"] = c.version
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Service{
		nc: nc, handlers: handlers(e, c.middleware), prefix: c.prefix, log: c.logger,
		slots: make(chan struct{}, c.maxInFlight),
		heavy: make(chan struct{}, c.maxHeavy), verbTimeout: c.verbTimeout,
		observe: c.observe, statsData: c.statsData, indexBucket: c.indexBucket,
		base: base, cancel: cancel,
		done:        make(chan struct{}),
		stopTimeout: c.stopTimeout,
		id:          strings.TrimPrefix(nats.NewInbox(), nats.InboxPrefix), // a NUID, as micro's ids are
		version:     ver,
		metadata:    md,
		started:     time.Now().UTC(),
		flights:     map[*flight]struct{}{},
		own:         ownIdentity(nc),
	}
	for _, verb := range Verbs() {
		s.endpoints = append(s.endpoints, &endpoint{verb: verb, subject: c.prefix + "." + verb})
	}
	if err := s.subscribe(); err != nil {
		s.unsubscribe()
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Stop()
		case <-s.done:
		}
	}()
	c.logger.Info("serving", "service", ServiceName, "id", s.id, "version", ver, "prefix", c.prefix,
		"max_in_flight", c.maxInFlight, "max_heavy", c.maxHeavy, "verb_timeout", c.verbTimeout, "stop_timeout", c.stopTimeout)
	return s, nil
}

// newServeConfig is the configuration opts give, with the defaults for what
// they leave out or give out of range.
func newServeConfig(opts []ServeOption) serveConfig {
	c := serveConfig{prefix: DefaultPrefix, maxInFlight: DefaultMaxInFlight, stopTimeout: DefaultStopTimeout,
		maxHeavy: DefaultMaxHeavy, verbTimeout: DefaultVerbTimeout}
	for _, o := range opts {
		o.applyServe(&c)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.maxInFlight < 1 {
		c.maxInFlight = 1
	}
	if c.stopTimeout <= 0 {
		c.stopTimeout = DefaultStopTimeout
	}
	if c.maxHeavy < 1 {
		c.maxHeavy = DefaultMaxHeavy
	}
	if c.verbTimeout <= 0 {
		c.verbTimeout = DefaultVerbTimeout
	}
	return c
}

// subscribe subscribes the endpoints, the discovery and the subject of
// requests for no verb, and flushes them to the server. On an error the
// caller unsubscribes what was subscribed.
func (s *Service) subscribe() error {
	for _, ep := range s.endpoints {
		sub, err := s.nc.QueueSubscribe(ep.subject, QueueGroup, s.handler(ep))
		if err != nil {
			return fmt.Errorf("could not subscribe to the endpoint %s, so nothing is served: %w", ep.subject, err)
		}
		ep.sub = sub
	}
	if err := s.subscribeDiscovery(); err != nil {
		return fmt.Errorf("could not answer the %s service discovery, so nothing is served: %w", ServiceName, err)
	}
	if err := s.subscribeUnknown(); err != nil {
		return fmt.Errorf("could not subscribe to %s.*, where requests for no verb are answered, so nothing is served: %w", s.prefix, err)
	}
	if err := s.nc.Flush(); err != nil {
		return fmt.Errorf("%w: the %s subscriptions did not reach the server (%v), so nothing is served", kept.ErrNoBus, ServiceName, err)
	}
	return nil
}

// unsubscribe undoes subscribe, whatever part of it was done, and cancels
// the verbs' context.
func (s *Service) unsubscribe() {
	for _, ep := range s.endpoints {
		if ep.sub != nil {
			_ = ep.sub.Unsubscribe()
		}
	}
	for _, sub := range s.control {
		_ = sub.Unsubscribe()
	}
	if s.unknown != nil {
		_ = s.unknown.Unsubscribe()
	}
	s.cancel()
}

// Prefix is the subject prefix the service answers on.
func (s *Service) Prefix() string { return s.prefix }

// Stop stops taking requests (a request that still arrives is answered 503),
// then waits up to WithStopTimeout for the verbs in flight to finish. If some
// are still running then, it logs them, cancels their context and waits a
// short while more; it returns an error wrapping kept.ErrFailed that says
// the verbs were cut short. Stop is safe to call more than once, and from
// several goroutines; each call returns the first one's result.
func (s *Service) Stop() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		close(s.done)
		var errs []error
		for _, ep := range s.endpoints {
			// Drain: requests already delivered are still answered (503).
			if err := ep.sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				errs = append(errs, fmt.Errorf("could not stop taking requests on %s: %w", ep.subject, err))
			}
		}
		if s.unknown != nil { // with the verbs: a request after Stop finds no responders
			_ = s.unknown.Unsubscribe()
		}
		s.stopErr = s.waitVerbs()
		for _, sub := range s.control {
			_ = sub.Unsubscribe()
		}
		s.cancel()
		if s.stopErr == nil && len(errs) > 0 {
			s.stopErr = errors.Join(errs...)
		}
		s.log.Info("stopped serving", "prefix", s.prefix)
	})
	return s.stopErr
}

// waitVerbs waits for the verbs in flight: up to the stop timeout, then,
// having cancelled them, up to cutWait more.
func (s *Service) waitVerbs() error {
	all := make(chan struct{})
	go func() { s.running.Wait(); close(all) }()
	grace := time.NewTimer(s.stopTimeout)
	defer grace.Stop()
	select {
	case <-all:
		return nil
	case <-grace.C:
	}
	cut := s.inFlight()
	for _, f := range cut {
		s.log.Warn("a verb was still running when the stop timeout ended; cancelling it",
			"verb", f.verb, "module", f.module, "local", f.local, "caller", f.caller,
			"running_for", time.Since(f.since).Round(time.Millisecond), "stop_timeout", s.stopTimeout)
	}
	s.cancel()
	last := time.NewTimer(cutWait)
	defer last.Stop()
	select {
	case <-all:
	case <-last.C:
		left := s.inFlight()
		for _, f := range left {
			s.log.Error("a cancelled verb did not end; the keeper stops without it",
				"verb", f.verb, "module", f.module, "local", f.local, "caller", f.caller)
		}
	}
	names := make([]string, 0, len(cut))
	for _, f := range cut {
		if f.module != "" {
			names = append(names, fmt.Sprintf("%s of %s/%s", f.verb, f.module, f.local))
		} else {
			names = append(names, f.verb)
		}
	}
	return kept.Errorf(kept.ErrFailed, "%d verb(s) were still running %s after the stop began and were cut short (%s); "+
		"a restarted keeper finishes or undoes any restore they left half-way",
		len(cut), s.stopTimeout, strings.Join(names, ", "))
}

func (s *Service) inFlight() []*flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := make([]*flight, 0, len(s.flights))
	for f := range s.flights {
		fs = append(fs, f)
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].since.Before(fs[j].since) })
	return fs
}

// handler runs one verb per request in its own goroutine: a heavy verb
// once a heavy slot is free, else refused at once (503, Retry-After); any
// other once a slot is free. The endpoint's figures cover the request from
// its arrival to its reply.
func (s *Service) handler(ep *endpoint) nats.MsgHandler {
	return func(m *nats.Msg) {
		req := &request{msg: m, ep: ep, start: time.Now(), observe: s.observe}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			s.refuse(req)
			return
		}
		s.running.Add(1)
		s.mu.Unlock()
		stopBeat := s.beat(m, ep.verb) // from arrival: the wait for a slot counts
		slots := s.slots
		if heavyVerb(ep.verb, m.Data) {
			slots = s.heavy
			select {
			case s.heavy <- struct{}{}:
			default:
				stopBeat()
				s.fail(req, ep.verb, s.overloaded(ep.verb))
				s.running.Done()
				return
			}
		} else {
			select {
			case s.slots <- struct{}{}: // wait for a free slot: back-pressure on this endpoint
			case <-s.done:
				stopBeat()
				s.refuse(req)
				s.running.Done()
				return
			}
		}
		ep.enter(1)
		req.free = func() { <-slots }
		go func() {
			defer s.running.Done()
			defer stopBeat()
			defer ep.enter(-1)
			s.run(ep.verb, req)
			req.record(0, "") // counted once even if a path of run sent no reply; gives back the slot
		}()
	}
}

// refuse answers a request that came while the keeper is stopping.
func (s *Service) refuse(req *request) {
	s.fail(req, req.ep.verb, fmt.Errorf("%w: this keeper is stopping, so %s was not started; try again", kept.ErrNoBus, req.ep.verb))
}
