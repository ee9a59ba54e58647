package jsbus_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// writeContext writes a nats CLI context under a temporary XDG_CONFIG_HOME.
func writeContext(t *testing.T, name, body string) string {
	t.Helper()
	root := os.Getenv("XDG_CONFIG_HOME")
	if root == "" {
		root = t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", root)
	}
	dir := filepath.Join(root, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "nats://" + addr
}

func TestConnectURLAndContext(t *testing.T) {
	s := natstest.Start(t, nil)
	nc, err := jsbus.Connect(jsbus.ConnOptions{URL: s.ClientURL(), Name: "keeper-test", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if !nc.IsConnected() || nc.Opts.Name != "keeper-test" || nc.Opts.MaxReconnect != -1 {
		t.Fatalf("connected %v name %q max reconnect %d", nc.IsConnected(), nc.Opts.Name, nc.Opts.MaxReconnect)
	}
	nc.Close()

	t.Setenv("XDG_CONFIG_HOME", "")
	writeContext(t, "live", `{"description":"test","url":"`+s.ClientURL()+`","color_scheme":"","jetstream_domain":""}`)
	nc, err = jsbus.Connect(jsbus.ConnOptions{Context: "live", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if nc.ConnectedUrl() != s.ClientURL() {
		t.Fatalf("context connected to %s, want %s", nc.ConnectedUrl(), s.ClientURL())
	}
	nc.Close()

	// An explicit URL wins over the context's.
	writeContext(t, "dead", `{"url":"`+closedPort(t)+`"}`)
	nc, err = jsbus.Connect(jsbus.ConnOptions{Context: "dead", URL: s.ClientURL(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := jsbus.Connect(jsbus.ConnOptions{Context: "dead", Logger: quiet()}); !errors.Is(err, keeper.ErrNoBus) {
		t.Fatalf("context pointing at a closed port: %v, want ErrNoBus", err)
	}
}

func TestConnectRefusals(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	good := writeContext(t, "good", `{"url":"nats://127.0.0.1:1"}`)
	if err := os.Symlink(good, filepath.Join(filepath.Dir(good), "link.json")); err != nil {
		t.Fatal(err)
	}
	writeContext(t, "domain", `{"url":"nats://127.0.0.1:1","jetstream_domain":"hub"}`)
	writeContext(t, "apiprefix", `{"url":"nats://127.0.0.1:1","jetstream_api_prefix":"$JS.hub.API"}`)
	writeContext(t, "opcreds", `{"url":"nats://127.0.0.1:1","creds":"op://vault/item"}`)
	writeContext(t, "envtoken", `{"url":"nats://127.0.0.1:1","token":"env://TOKEN"}`)
	writeContext(t, "nkeymissing", `{"url":"nats://127.0.0.1:1","nkey":"/nonexistent/seed.nk"}`)
	writeContext(t, "broken", `{"url":`)
	for _, o := range []jsbus.ConnOptions{
		{Context: "missing"}, {Context: "../good"}, {Context: "a/b"}, {Context: "link"}, {Context: "apiprefix"},
		{Context: "opcreds"}, {Context: "envtoken"}, {Context: "nkeymissing"}, {Context: "broken"},
		{URL: "nats://127.0.0.1:1", Creds: "/nonexistent/user.creds"},
		{URL: "nats://127.0.0.1:1", NKey: t.TempDir()},
		{URL: "nats://127.0.0.1:1", TLSCert: good},
	} {
		o.Logger = quiet()
		if _, err := jsbus.Connect(o); !errors.Is(err, keeper.ErrBadRequest) {
			t.Errorf("Connect(%+v): %v, want ErrBadRequest", o, err)
		}
	}
	// A context's JetStream domain is used (ContextDomain), not refused.
	if d, err := jsbus.ContextDomain("domain"); err != nil || d != "hub" {
		t.Errorf("ContextDomain of a context with jetstream_domain hub: %q %v", d, err)
	}
	if _, err := jsbus.Connect(jsbus.ConnOptions{Context: "domain", Logger: quiet()}); !errors.Is(err, keeper.ErrNoBus) {
		t.Errorf("a context with a domain: %v, want it used (ErrNoBus at its closed port)", err)
	}
	_, err := jsbus.Connect(jsbus.ConnOptions{URL: "nats://user:secret@" + closedPort(t)[len("nats://"):], Logger: quiet()})
	if !errors.Is(err, keeper.ErrNoBus) {
		t.Fatalf("closed port: %v, want ErrNoBus", err)
	}
	if msg := err.Error(); strings.Contains(msg, "secret") {
		t.Fatalf("the error shows the password: %s", msg)
	}
}

// The keeper's connection survives a server restart: the adapter works again
// once the server is back on the same port with the same store.
func TestReconnectAfterServerRestart(t *testing.T) {
	ctx := testCtx(t)
	r := newRestartable(t, ctx)
	if err := r.a.Put(ctx, "plan.a.b", []byte(`{"kept":true}`)); err != nil {
		t.Fatal(err)
	}
	r.stop()
	r.start(t)
	r.waitConnected(t)
	v, err := r.a.Get(ctx, "plan.a.b")
	if err != nil || string(v) != `{"kept":true}` {
		t.Fatalf("index after the restart: %s %v", v, err)
	}
}

// restartable is a server of a test's own and an adapter on a connection
// that tries to reconnect every 20 ms, for tests that stop the server and
// start it again on the same port with the same store. The server running
// at the end is shut down at cleanup.
type restartable struct {
	store string
	port  int
	s     *server.Server
	nc    *nats.Conn
	a     *jsbus.Adapter
}

func newRestartable(t *testing.T, ctx context.Context) *restartable {
	t.Helper()
	r := &restartable{store: t.TempDir()}
	s, err := natstest.Run(natstest.Options(r.store))
	if err != nil {
		t.Fatal(err)
	}
	r.s, r.port = s, s.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { r.s.Shutdown(); r.s.WaitForShutdown() })
	if r.nc, err = jsbus.Connect(jsbus.ConnOptions{URL: s.ClientURL(), ReconnectWait: 20 * time.Millisecond, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.nc.Close)
	if r.a, err = jsbus.New(ctx, r.nc, jsbus.WithLogger(quiet())); err != nil {
		t.Fatal(err)
	}
	return r
}

// stop shuts the server down and waits until it has.
func (r *restartable) stop() { r.s.Shutdown(); r.s.WaitForShutdown() }

// start runs the server again, on the same port with the same store.
func (r *restartable) start(t *testing.T) *server.Server {
	t.Helper()
	opts := natstest.Options(r.store)
	opts.Port, opts.NoLog = r.port, true
	s, err := natstest.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	return s
}

// waitConnected waits, up to 20 s, until the adapter's connection is back.
func (r *restartable) waitConnected(t *testing.T) {
	t.Helper()
	for i := 0; !r.nc.IsConnected(); i++ {
		if i > 1000 || r.nc.IsClosed() {
			t.Fatalf("the connection did not come back (closed %v)", r.nc.IsClosed())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
