package jsbus_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	writeContext(t, "opcreds", `{"url":"nats://127.0.0.1:1","creds":"op://vault/item"}`)
	writeContext(t, "envtoken", `{"url":"nats://127.0.0.1:1","token":"env://TOKEN"}`)
	writeContext(t, "nkeymissing", `{"url":"nats://127.0.0.1:1","nkey":"/nonexistent/seed.nk"}`)
	writeContext(t, "broken", `{"url":`)
	for _, o := range []jsbus.ConnOptions{
		{Context: "missing"}, {Context: "../good"}, {Context: "a/b"}, {Context: "link"}, {Context: "domain"},
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
	store := t.TempDir()
	opts := natstest.Options(store)
	s, err := natstest.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	port := s.Addr().(*net.TCPAddr).Port
	nc, err := jsbus.Connect(jsbus.ConnOptions{URL: s.ClientURL(), ReconnectWait: 20 * time.Millisecond, Logger: quiet()})
	if err != nil {
		s.Shutdown()
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := testCtx(t)
	a, err := jsbus.New(ctx, nc, jsbus.WithLogger(quiet()))
	if err != nil {
		s.Shutdown()
		t.Fatal(err)
	}
	if err := a.Put(ctx, "plan.a.b", []byte(`{"kept":true}`)); err != nil {
		s.Shutdown()
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()

	opts2 := natstest.Options(store)
	opts2.Port = port
	s2, err := natstest.Run(opts2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s2.Shutdown(); s2.WaitForShutdown() }()
	for i := 0; !nc.IsConnected(); i++ {
		if i > 1000 || nc.IsClosed() {
			t.Fatalf("the connection did not come back (closed %v)", nc.IsClosed())
		}
		time.Sleep(20 * time.Millisecond)
	}
	v, err := a.Get(ctx, "plan.a.b")
	if err != nil || string(v) != `{"kept":true}` {
		t.Fatalf("index after the restart: %s %v", v, err)
	}
}
