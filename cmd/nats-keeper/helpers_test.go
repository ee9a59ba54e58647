package main

import (
	"bytes"
	"context"
	"github.com/nats-keeper/nats-keeper/store"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// bed is an embedded server with a real keeper (jsbus + keeper + verbs)
// serving on it.
type bed struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	dir string
	svc *verbs.Service
	bus *jsbus.Adapter // the keeper's bus, index and acts (newBedWith's)
}

func newBed(t *testing.T) *bed {
	t.Helper()
	tb := testbed.New(t, testbed.WithoutBus(), testbed.WithStore(dirStore))
	pd, err := openServeDir(filepath.Join(t.TempDir(), "keeper")) // its --dir, as serve's: a spool directory in it
	if err != nil {
		t.Fatal(err)
	}
	svc, err := startKeeper(context.Background(), tb.Conn, keeperSetup{Store: tb.Config.Store, Dir: pd}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	return &bed{url: tb.Server.ClientURL(), nc: tb.Conn, js: tb.JS, dir: tb.Dir, svc: svc}
}

// newBedWith serves a keeper whose config wrap changes
// (faults in front of its bus, say).
func newBedWith(t *testing.T, wrap func(*keeper.Config)) *bed {
	t.Helper()
	tb := testbed.New(t, testbed.WithBusOptions(jsbus.WithLogger(quietLog())), testbed.WithStore(dirStore),
		testbed.WithConfig(wrap))
	svc, err := verbs.Serve(context.Background(), tb.Conn, tb.Keeper, verbs.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	return &bed{url: tb.Server.ClientURL(), nc: tb.Conn, js: tb.JS, dir: tb.Dir, svc: svc, bus: tb.Bus}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (b *bed) flags() clientFlags {
	return clientFlags{Conn: connFlags{Server: b.url}, Prefix: verbs.DefaultPrefix, Timeout: time.Minute, Caller: "test@host"}
}

type outs struct{ out, err bytes.Buffer }

func (o *outs) output() output { return output{Out: &o.out, Err: &o.err} }

// runArgs runs a whole command line in process and returns its exit code.
func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, env{Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
	return code, out.String(), errb.String()
}

// dirStore is the file store in dir, closed when the test ends.
func dirStore(t testing.TB, dir string) store.Store {
	t.Helper()
	st, err := openStore(context.Background(), "", dir, storeFlags{}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
