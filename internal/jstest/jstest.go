// Package jstest is the setup that nats-keeper's tests share: an embedded
// JetStream server under t.TempDir() on a random loopback port, a
// connection to it and its JetStream handle, each stopped or closed when
// the test ends.
//
// It is for tests only: it imports testing, and only _test.go files import
// it. The embedded server itself comes from internal/natstest.
package jstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
)

// Start starts an embedded JetStream server with opts (nil: natstest's
// defaults, the store under t.TempDir()), connects to it and opens
// JetStream on the connection. A failure fails the test.
func Start(t testing.TB, opts *server.Options) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := natstest.Start(t, opts)
	nc := natstest.Connect(t, s)
	return s, nc, JetStream(t, nc)
}

// JetStream opens JetStream on nc, or fails the test.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("open JetStream on %s: %v", nc.ConnectedUrlRedacted(), err)
	}
	return js
}
