// Package natstest starts embedded nats-servers with JetStream for tests, and
// for the demo: always on 127.0.0.1, a random port, the store in a directory the
// caller owns.
package natstest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Options returns server options for one JetStream server storing under dir.
func Options(dir string) *server.Options {
	return &server.Options{
		ServerName: "keeper-test",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	}
}

// Run starts a server with opts and waits until it accepts connections.
func Run(opts *server.Options) (*server.Server, error) {
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats-server: %w", err)
	}
	go s.Start()
	// A minute: on a loaded machine a server of a cluster took over 10 s
	// (TestLargeObjectR3's child process, in CI).
	if !s.ReadyForConnections(time.Minute) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats-server did not become ready in a minute")
	}
	return s, nil
}

// Start starts a JetStream server under t.TempDir() and stops it when the test
// ends. Pass a non-nil opts to change the defaults (its StoreDir is kept when set).
func Start(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	if opts == nil {
		opts = Options(t.TempDir())
	}
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	s, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Connect connects to s and closes the connection when the test ends.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("connect to %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ClusterOptions are the options of a cluster named name of one server per
// directory in dirs, on free loopback ports, each routed to all.
func ClusterOptions(name string, dirs []string) ([]*server.Options, error) {
	ports := make([]int, len(dirs))
	var routes []string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i]))
	}
	var out []*server.Options
	for i, dir := range dirs {
		o := Options(dir)
		o.ServerName = fmt.Sprintf("n%d", i+1)
		o.Cluster = server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: ports[i]}
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		out = append(out, o)
	}
	return out, nil
}

// Cluster starts an n-server JetStream cluster named name in this process,
// each store under t.TempDir(), stopped when the test ends.
func Cluster(t testing.TB, name string, n int) []*server.Server {
	t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	opts, err := ClusterOptions(name, dirs)
	if err != nil {
		t.Fatal(err)
	}
	var srvs []*server.Server
	for _, o := range opts {
		srvs = append(srvs, Start(t, o))
	}
	return srvs
}
