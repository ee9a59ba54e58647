package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/kept"
)

// clientDefaultURL is where client commands look when no server, $NATS_URL
// or context is given: where `nats-keeper serve --embedded` listens.
const clientDefaultURL = "nats://127.0.0.1:4222"

func (c connFlags) options(name string, log *slog.Logger) jsbus.ConnOptions {
	return jsbus.ConnOptions{
		URL: c.Server, Creds: c.Creds, NKey: c.NKey,
		TLSCert: c.TLSCert, TLSKey: c.TLSKey, TLSCA: c.TLSCA,
		Context: c.Context, Name: name, Logger: log,
	}
}

// connect connects to the bus; a failure wraps kept.ErrNoBus (exit 5)
// unless it already carries its kind.
func connect(ctx context.Context, c connFlags, name string, log *slog.Logger) (*nats.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.Context != "" && c.Server != "" {
		if c.Server != c.envURL {
			return nil, kept.Errorf(kept.ErrBadRequest, "--context %s and --server %s both say where to connect; give one of them, so nothing was done", c.Context, c.Server)
		}
		c.Server = "" // the context, named on the command line, wins over $NATS_URL
	}
	nc, err := jsbus.Connect(c.options(name, log))
	if err != nil {
		where := c.Server
		if c.Context != "" {
			where = "context " + c.Context
		}
		if kept.KindOf(err) != nil {
			return nil, fmt.Errorf("could not connect to NATS at %s, so nothing was done: %w", where, err)
		}
		return nil, kept.Errorf(kept.ErrNoBus, "could not connect to NATS at %s, so nothing was done: %v", where, err)
	}
	return nc, nil
}
