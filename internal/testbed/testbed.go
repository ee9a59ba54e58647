// Package testbed is the set-up that nats-keeper's tests share, in the
// spirit of net/http/httptest: an embedded nats-server with JetStream
// (127.0.0.1, a random port, its store under t.TempDir()), a connection to
// it, the bus adapter (jsbus) on it, a store (the file store under
// t.TempDir() unless a test opens another) and a keeper on them; all
// stopped or closed when the test ends (t.Cleanup).
//
//	b := testbed.New(t, testbed.WithClock(now), testbed.WithConfig(f.WrapAll))
//	rep, err := b.Keeper.SnapshotKept(b.Ctx, r)
//	other, err := b.KeeperOn(b.Dir, testbed.WithClock(now)) // a second keeper
//
// The faults a test injects into the bus or the store come from
// internal/fault, set in front of them with WithConfig.
//
// It is for tests only: it imports testing, and only _test.go files import
// it. It may import the keeper, its adapters and stores, and the other
// test helpers (internal/jstest, internal/natstest).
package testbed

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/filestore"
)

// Bed is one server, its bus and a keeper on it. Its fields are set by New
// and must not be changed.
type Bed struct {
	T      testing.TB
	Ctx    context.Context // the test's context
	Server *server.Server
	Conn   *nats.Conn
	JS     jetstream.JetStream
	Bus    *jsbus.Adapter // the bus, index and acts of the keeper; nil WithoutBus
	// Dir is the directory of the keeper's file store (made for it when the
	// test opens another store, and then unused).
	Dir string
	// Keeper is the keeper, opened on Config; nil WithoutKeeper.
	Keeper *keeper.Keeper
	// Config is what the keeper was opened with, after the options: its
	// Store, Bus, Index and Acts are what the keeper uses (the test's
	// faults in front of them, where it set some).
	Config keeper.Config
}

// Option changes what New sets up, or a keeper's config.
type Option func(*setup)

type setup struct {
	server   *server.Options
	bus      []jsbus.Option
	store    func(t testing.TB, dir string) store.Store
	data     []func(ctx context.Context, js jetstream.JetStream) error
	config   []func(*keeper.Config)
	noKeeper bool
	noBus    bool
}

// WithServer starts the server with opts (natstest.Start's rules: its
// StoreDir is kept when set, else made under t.TempDir()).
func WithServer(opts *server.Options) Option { return func(s *setup) { s.server = opts } }

// WithBusOptions opens the bus adapter with opts.
func WithBusOptions(opts ...jsbus.Option) Option {
	return func(s *setup) { s.bus = append(s.bus, opts...) }
}

// WithStore opens the keeper's store with open, given the bed's directory,
// instead of the file store there.
func WithStore(open func(t testing.TB, dir string) store.Store) Option {
	return func(s *setup) { s.store = open }
}

// WithData makes the test's data on the bus with mk, before the keeper
// opens.
func WithData(mk func(ctx context.Context, js jetstream.JetStream) error) Option {
	return func(s *setup) { s.data = append(s.data, mk) }
}

// WithConfig changes the keeper's config once the bed made it (a clock,
// limits, faults in front of its ports with internal/fault). Changes run in
// the order given.
func WithConfig(fns ...func(*keeper.Config)) Option {
	return func(s *setup) { s.config = append(s.config, fns...) }
}

// WithClock runs the keeper on now instead of the wall clock.
func WithClock(now func() time.Time) Option {
	return WithConfig(func(c *keeper.Config) { c.Now = now })
}

// WithoutKeeper sets up the server, bus and store but opens no keeper.
func WithoutKeeper() Option { return func(s *setup) { s.noKeeper = true } }

// WithoutBus sets up the server and the store, and neither the bus adapter
// nor a keeper: for tests of the code that opens them (the CLI's serve).
func WithoutBus() Option { return func(s *setup) { s.noBus, s.noKeeper = true, true } }

// New starts a server, the bus adapter on it, the test's data (WithData),
// a store and (unless WithoutKeeper) a keeper on them, for t. A failure
// fails the test.
func New(t testing.TB, opts ...Option) *Bed {
	t.Helper()
	var s setup
	for _, o := range opts {
		o(&s)
	}
	b := &Bed{T: t, Ctx: t.Context(), Dir: t.TempDir()}
	b.Server, b.Conn, b.JS = jstest.Start(t, s.server)
	open := s.store
	if open == nil {
		open = func(t testing.TB, dir string) store.Store { return FileStore(t, dir) }
	}
	if s.noBus {
		b.Config.Store = open(t, b.Dir)
		return b
	}
	var err error
	if b.Bus, err = jsbus.New(b.Ctx, b.Conn, s.bus...); err != nil {
		t.Fatalf("open the bus adapter on %s: %v", b.Server.ClientURL(), err)
	}
	for _, mk := range s.data {
		if err := mk(b.Ctx, b.JS); err != nil {
			t.Fatalf("make the test's data on %s: %v", b.Server.ClientURL(), err)
		}
	}
	b.Config = b.config(open(t, b.Dir))
	for _, fn := range s.config {
		fn(&b.Config)
	}
	if s.noKeeper {
		return b
	}
	if b.Keeper, err = keeper.New(b.Ctx, b.Config); err != nil {
		t.Fatalf("open a keeper on %s: %v", b.Server.ClientURL(), err)
	}
	return b
}

// config is a keeper's config on b's bus with st, logging nothing.
func (b *Bed) config(st store.Store) keeper.Config {
	return keeper.Config{Store: st, Bus: b.Bus, Index: b.Bus, Acts: b.Bus, Logger: Quiet()}
}

// KeeperOn opens another keeper on b's bus and index, with the file store
// in dir (b.Dir: the same store), as a keeper started again, or a second
// one, would. It takes WithConfig and WithClock options, as New does (a
// test on a clock passes the same one).
func (b *Bed) KeeperOn(dir string, opts ...Option) (*keeper.Keeper, error) {
	return b.KeeperWith(FileStore(b.T, dir), opts...)
}

// KeeperWith is KeeperOn with the store st.
func (b *Bed) KeeperWith(st store.Store, opts ...Option) (*keeper.Keeper, error) {
	var s setup
	for _, o := range opts {
		o(&s)
	}
	cfg := b.config(st)
	for _, fn := range s.config {
		fn(&cfg)
	}
	return keeper.New(b.Ctx, cfg)
}

// Adapter opens another bus adapter with opts on a connection of its own
// to b's server (an index of its own, say), or fails the test.
func (b *Bed) Adapter(opts ...jsbus.Option) *jsbus.Adapter {
	b.T.Helper()
	a, err := jsbus.New(b.Ctx, natstest.Connect(b.T, b.Server), opts...)
	if err != nil {
		b.T.Fatalf("open another bus adapter on %s: %v", b.Server.ClientURL(), err)
	}
	return a
}

// FileStore is the file store in dir, closed when the test ends.
func FileStore(t testing.TB, dir string) *filestore.Store {
	t.Helper()
	st, err := filestore.Open(dir)
	if err != nil {
		t.Fatalf("open the file store in %s: %v", dir, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Quiet is a logger that discards what it is given.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
