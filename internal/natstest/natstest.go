// Package natstest starts embedded nats-servers with JetStream for tests:
// always on 127.0.0.1, a random port, the store under t.TempDir(), stopped when
// the test ends. The servers themselves are internal/embedded's, which the
// binary uses without linking this package (and testing).
//
// It imports internal/embedded and nats.go only.
package natstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/internal/embedded"
)

// Options returns server options for one JetStream server storing under
// dir: embedded.Options.
func Options(dir string) *server.Options { return embedded.Options(dir) }

// Run starts a server with opts and waits until it accepts connections:
// embedded.Run.
func Run(opts *server.Options) (*server.Server, error) { return embedded.Run(opts) }

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
// directory in dirs: embedded.ClusterOptions.
func ClusterOptions(name string, dirs []string) ([]*server.Options, error) {
	return embedded.ClusterOptions(name, dirs)
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
