package jsbus_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

type bus struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	a   *jsbus.Adapter
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newBus(t *testing.T, opts ...jsbus.Option) *bus {
	t.Helper()
	tb := testbed.New(t, testbed.WithoutKeeper(), testbed.WithBusOptions(append([]jsbus.Option{jsbus.WithLogger(quiet())}, opts...)...))
	return &bus{srv: tb.Server, nc: tb.Conn, js: tb.JS, a: tb.Bus}
}

// buf is an io.WriteCloser that remembers whether it was closed.
type buf struct {
	bytes.Buffer
	closed bool
}

func (b *buf) Close() error { b.closed = true; return nil }

// snapshot takes the snapshot of stream into memory.
func snapshot(t *testing.T, a *jsbus.Adapter, stream string) (data, meta []byte) {
	t.Helper()
	var d, m buf
	if err := a.Snapshot(testCtx(t), stream, &d, &m); err != nil {
		t.Fatalf("snapshot %s: %v", stream, err)
	}
	if !d.closed || !m.closed {
		t.Fatalf("snapshot %s left a writer open (data closed %v, meta closed %v)", stream, d.closed, m.closed)
	}
	if d.Len() == 0 || m.Len() == 0 {
		t.Fatalf("snapshot %s is empty", stream)
	}
	return d.Bytes(), m.Bytes()
}

// trickle returns at most 7 bytes per read and the last ones with io.EOF,
// as some readers do.
type trickle struct{ r *bytes.Reader }

func (t *trickle) Read(p []byte) (int, error) {
	if len(p) > 7 {
		p = p[:7]
	}
	n, err := t.r.Read(p)
	if err == nil && t.r.Len() == 0 {
		return n, io.EOF
	}
	return n, err
}

// everyConsumer lists the durable consumers on every stream of the bus.
func everyConsumer(ctx context.Context, a *jsbus.Adapter) ([]keeper.Position, error) {
	streams, err := a.Streams(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range streams {
		names = append(names, s.Name)
	}
	return a.Consumers(ctx, names)
}
