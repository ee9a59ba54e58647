// Package natstest starts embedded nats-servers with JetStream for tests, and
// for the demo: always on 127.0.0.1, a random port, the store in a directory the
// caller owns.
package natstest

import (
	"fmt"
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
