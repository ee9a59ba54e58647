// Package keepertest runs a nats-keeper for tests, in the spirit of
// net/http/httptest: an embedded nats-server with JetStream (one server, or a
// cluster of three) and a keeper serving its verbs on it, all in the test's
// process, on random loopback ports, with every file under the test's
// temporary directory.
//
// A module's integration test starts one with Start and talks to it through
// the returned connection and client:
//
//	func TestMigration(t *testing.T) {
//		k := keepertest.Start(t, keepertest.WithTestLog())
//		js, _ := jetstream.New(k.Conn)
//		// make the module's data, e.g. KV bucket billing_ledger ...
//		res, err := k.Client.Guard(ctx, verbs.GuardRequest{Module: "billing", Local: "ledger",
//			Form: 3, Fingerprint: "v4", Caller: t.Name()}, migrate)
//		// ... check res.Restored, res.Aside and the bucket
//	}
//
// Everything Start started is stopped when the test ends (t.Cleanup). New
// and Close do the same without a test, for examples and TestMain.
//
// It is wiring, like cmd/nats-keeper: it may import the wiring
// (internal/wiring), internal/embedded, store and verbs; nothing of this
// module imports it.
package keepertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/embedded"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// Version is the version the harness's keeper records in its archives and
// announces to `nats micro info`.
const Version = "0.0.0-keepertest"

// ClusterSize is the number of servers WithCluster starts.
const ClusterSize = 3

// Keeper is a running harness: the server(s), a connection, a client of the
// keeper's verbs and the keeper's store. Its fields are set by Start or New
// and must not be changed.
type Keeper struct {
	// URL is the client URL of the server, or of every server of a cluster
	// separated by commas, as nats.Connect takes it.
	URL string
	// Conn is a connection to the server(s), closed by Close.
	Conn *nats.Conn
	// Client sends the keeper's verbs on Conn, at the harness's prefix.
	Client *verbs.Client
	// Store is where the keeper keeps its points and asides; closed by Close.
	Store store.Store
	// Servers are the embedded nats-servers: one, or ClusterSize with
	// WithCluster.
	Servers []*server.Server
	// Prefix and Bucket are the subject prefix of the verbs and the KV
	// bucket of the keeper's index.
	Prefix, Bucket string

	keeper  *wiring.Keeper
	cancel  context.CancelFunc
	tempDir string // removed by Close, when New made it
	once    sync.Once
	err     error
}

// Option configures Start or New.
type Option func(*config)

type config struct {
	prefix, bucket string
	storeURL       string
	logger         *slog.Logger
	testLog        bool
	cluster        bool
	dir            string
}

// WithPrefix sets the subject prefix of the keeper's verbs (default
// verbs.DefaultPrefix); the harness's Client uses it too.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithBucket sets the KV bucket of the keeper's index (default "kept").
func WithBucket(b string) Option { return func(c *config) { c.bucket = b } }

// WithStoreURL sets where the keeper keeps points and asides, as
// `nats-keeper serve --store` takes it: file:///path,
// nats://host:port/bucket (a JetStream object store, made if missing, such
// as on another harness's server) or s3://bucket/prefix (endpoint, region
// and credentials from the AWS environment, such as AWS_ENDPOINT_URL_S3).
// The default is a file store under the temporary directory.
func WithStoreURL(u string) Option { return func(c *config) { c.storeURL = u } }

// WithLogger sets the keeper's logger. The default discards the logs.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithTestLog sends the keeper's logs (level info and above) to t.Log, so
// they show with the test's output when it fails or runs with -v. It is for
// Start; New, which has no test, ignores it.
func WithTestLog() Option { return func(c *config) { c.testLog = true } }

// WithCluster starts a JetStream cluster of ClusterSize servers in the
// process instead of one server; Start and New return once it takes
// streams of three replicas.
func WithCluster() Option { return func(c *config) { c.cluster = true } }

// Start starts a harness for t and stops it when the test ends: an embedded
// nats-server with JetStream (store under t.TempDir(), a random loopback
// port), or a cluster with WithCluster, and a keeper serving on it. It fails
// the test, with t.Fatal, when anything does not start.
func Start(t testing.TB, opts ...Option) *Keeper {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	c.dir = t.TempDir()
	if c.testLog && c.logger == nil {
		h := newTestHandler(t, slog.LevelInfo)
		// Registered first, so it runs last: the keeper logs no more once
		// the test's cleanups are done.
		t.Cleanup(h.close)
		c.logger = slog.New(h)
	}
	k, err := start(c)
	if err != nil {
		t.Fatalf("keepertest: %v", err)
	}
	t.Cleanup(func() {
		if err := k.Close(); err != nil {
			t.Errorf("keepertest: %v", err)
		}
	})
	return k
}

// New starts a harness as Start does, without a test: under a temporary
// directory of its own, which Close removes. Close it when done.
func New(opts ...Option) (*Keeper, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	dir, err := os.MkdirTemp("", "keepertest-")
	if err != nil {
		return nil, fmt.Errorf("keepertest: could not make a temporary directory, so nothing was started: %w", err)
	}
	c.dir = dir
	k, err := start(c)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("keepertest: %w", err)
	}
	k.tempDir = dir
	return k, nil
}

func start(c config) (_ *Keeper, err error) {
	if c.prefix == "" {
		c.prefix = verbs.DefaultPrefix
	}
	if c.bucket == "" {
		c.bucket = wiring.DefaultBucket
	}
	if c.logger == nil {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &Keeper{Prefix: c.prefix, Bucket: c.bucket, cancel: cancel}
	defer func() {
		if err != nil {
			_ = k.Close()
		}
	}()
	if k.Servers, err = startServers(c); err != nil {
		return nil, err
	}
	var urls []string
	for _, s := range k.Servers {
		urls = append(urls, s.ClientURL())
	}
	k.URL = strings.Join(urls, ",")
	if k.Conn, err = nats.Connect(k.URL, nats.Name("keepertest")); err != nil {
		return nil, fmt.Errorf("could not connect to the embedded server at %s, so no keeper was started: %w", k.URL, err)
	}
	if c.cluster {
		if err := waitReplicated(ctx, k.Conn); err != nil {
			return nil, err
		}
	}
	if k.Store, err = wiring.OpenStore(ctx, c.storeURL, filepath.Join(c.dir, "keeper"), wiring.StoreConfig{Logger: c.logger}); err != nil {
		return nil, fmt.Errorf("%w, so no keeper was started", err)
	}
	if k.keeper, err = wiring.Start(ctx, k.Conn, wiring.Setup{Store: k.Store, Prefix: c.prefix, Bucket: c.bucket,
		Version: Version, Logger: c.logger}); err != nil {
		return nil, err
	}
	k.Client = verbs.NewClient(k.Conn, verbs.WithPrefix(c.prefix))
	return k, nil
}

// startServers starts the one server, or the cluster, under c.dir.
func startServers(c config) ([]*server.Server, error) {
	if !c.cluster {
		s, err := embedded.Run(embedded.Options(filepath.Join(c.dir, "nats")))
		if err != nil {
			return nil, err
		}
		return []*server.Server{s}, nil
	}
	dirs := make([]string, ClusterSize)
	for i := range dirs {
		dirs[i] = filepath.Join(c.dir, fmt.Sprintf("nats-%d", i+1))
	}
	opts, err := embedded.ClusterOptions("keepertest", dirs)
	if err != nil {
		return nil, err
	}
	return embedded.RunCluster(opts)
}

// waitReplicated waits until the cluster takes a stream of three replicas:
// while it forms, the first such create fails for some seconds.
func waitReplicated(ctx context.Context, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	const name = "KEEPERTEST_READY"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.CreateStream(cctx, jetstream.StreamConfig{Name: name, Subjects: []string{"keepertest.ready"},
			Replicas: ClusterSize, Storage: jetstream.MemoryStorage})
		if err == nil {
			err = js.DeleteStream(cctx, name)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster did not take a stream of %d replicas in 2 minutes, so no keeper was started: %w", ClusterSize, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Close stops the keeper (letting the verbs in flight finish), closes the
// store and the connection, shuts the servers down and, for New, removes
// the temporary directory. It is safe to call more than once; later calls
// return the first call's error.
func (k *Keeper) Close() error {
	k.once.Do(func() {
		var errs []error
		if k.keeper != nil {
			if err := k.keeper.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping the keeper: %w", err))
			}
		}
		k.cancel()
		if k.Store != nil {
			if err := k.Store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing the store: %w", err))
			}
		}
		if k.Conn != nil {
			k.Conn.Close()
		}
		embedded.Shutdown(k.Servers...)
		if k.tempDir != "" {
			if err := os.RemoveAll(k.tempDir); err != nil {
				errs = append(errs, err)
			}
		}
		k.err = errors.Join(errs...)
	})
	return k.err
}

// JetStream returns a JetStream context on the harness's connection.
func (k *Keeper) JetStream() (jetstream.JetStream, error) { return jetstream.New(k.Conn) }

// testHandler is a slog handler writing to t.Log until the test's cleanups
// close it (a log after the test ended would panic).
type testHandler struct {
	sink   *testSink
	level  slog.Level
	prefix string // the groups, each followed by "."
	attrs  string // " key=value" of WithAttrs, keys with their groups
}

type testSink struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func newTestHandler(t testing.TB, level slog.Level) *testHandler {
	return &testHandler{sink: &testSink{t: t}, level: level}
}

func (h *testHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *testHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "keeper: %s %s%s", r.Level, r.Message, h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s%s=%v", h.prefix, a.Key, a.Value)
		return true
	})
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	if !h.sink.closed {
		h.sink.t.Log(b.String())
	}
	return nil
}

func (h *testHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, " %s%s=%v", h.prefix, a.Key, a.Value)
	}
	n.attrs += b.String()
	return &n
}

func (h *testHandler) WithGroup(name string) slog.Handler {
	n := *h
	n.prefix += name + "."
	return &n
}

func (h *testHandler) close() {
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	h.sink.closed = true
}
