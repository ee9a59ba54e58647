package keeper_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/filestore"
)

const (
	module = "billing"
	local  = "ledger"
)

// env is one embedded server with the sample kept data and a keeper on it.
type env struct {
	t     *testing.T
	ctx   context.Context
	srv   *server.Server
	js    jetstream.JetStream
	bus   *jsbus.Adapter
	k     *keeper.Keeper
	dir   string
	names sample.Names
	bed   *testbed.Bed
	// autoFull: the keepers of this env pick full for auto (newEnv).
	autoFull bool
}

type envOption func(*keeper.Config)

// newEnv is the test bed with the sample kept data made on its bus before
// the keeper opens; opts change the keeper's config.
//
// Its keeper's auto method picks full for every stream (AutoPicksFull):
// the tests written before the restore methods test the full method's
// exact results. newAutoEnv's picks as a keeper does.
func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	e := newAutoEnv(t, opts...)
	keeper.AutoPicksFull(e.k)
	e.autoFull = true
	return e
}

// newAutoEnv is newEnv whose keeper's auto method picks as a keeper does.
func newAutoEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	version := func(c *keeper.Config) { c.Version = "test" }
	b := testbed.New(t, testbed.WithConfig(version), testbed.WithConfig(configs(opts)...), testbed.WithData(func(ctx context.Context, js jetstream.JetStream) error {
		return sample.Create(ctx, js, module, local)
	}))
	return &env{t: t, ctx: b.Ctx, srv: b.Server, js: b.JS, bus: b.Bus, k: b.Keeper, dir: b.Dir, names: sample.NamesOf(module, local), bed: b}
}

// configs are opts as the test bed's config changes.
func configs(opts []envOption) []func(*keeper.Config) {
	fns := make([]func(*keeper.Config), len(opts))
	for i, o := range opts {
		fns[i] = o
	}
	return fns
}

// keeperOn opens another keeper on e's bus and index with directory dir,
// as a keeper started again (or a second one) would. opts change its
// config as newEnv's do (a test on the keeper's clock passes the same one).
func (e *env) keeperOn(dir string, opts ...envOption) (*keeper.Keeper, error) {
	k, err := e.bed.KeeperOn(dir, testbed.WithConfig(configs(opts)...))
	if err == nil && e.autoFull {
		keeper.AutoPicksFull(k)
	}
	return k, err
}

// keeperOnStore is keeperOn with the store st.
func (e *env) keeperOnStore(st store.Store, opts ...envOption) (*keeper.Keeper, error) {
	k, err := e.bed.KeeperWith(st, testbed.WithConfig(configs(opts)...))
	if err == nil && e.autoFull {
		keeper.AutoPicksFull(k)
	}
	return k, err
}

// fileStore is the file store in dir, closed when the test ends.
func fileStore(t testing.TB, dir string) *filestore.Store { return testbed.FileStore(t, dir) }

// kept dumps the kept data's three streams.
func (e *env) kept() *sample.Snapshot {
	e.t.Helper()
	d, err := sample.Dump(e.ctx, e.js, e.names.Streams()...)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// shared dumps the shared stream that the module reads.
func (e *env) shared() *sample.StreamDump {
	e.t.Helper()
	d, err := sample.Dump(e.ctx, e.js, sample.SharedStream)
	if err != nil {
		e.t.Fatal(err)
	}
	return &d.Streams[0]
}

func consumer(t *testing.T, sd *sample.StreamDump, name string) sample.ConsumerDump {
	t.Helper()
	for _, c := range sd.Consumers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("stream %s has no consumer %s", sd.Name, name)
	return sample.ConsumerDump{}
}

func req(form int, fp string) keeper.Request {
	return keeper.Request{Module: module, Local: local, Form: form, Fingerprint: fp, Caller: "test", Why: "testing"}
}

func (e *env) snapshot(form int, fp string) *keeper.Reply {
	e.t.Helper()
	r := req(form, fp)
	r.CatchUp = "ledger-migrate"
	rep, err := e.k.SnapshotKept(e.ctx, r)
	if err != nil {
		e.t.Fatalf("snapshot-kept: %v", err)
	}
	return rep
}

// removeKept deletes the kept data's streams: the kept data is then absent.
func (e *env) removeKept() {
	e.t.Helper()
	for _, s := range e.names.Streams() {
		if err := e.js.DeleteStream(e.ctx, s); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) change() {
	e.t.Helper()
	if err := sample.Change(e.ctx, e.js, module, local); err != nil {
		e.t.Fatal(err)
	}
}

// archiveStreams restores every stream of the archive in dir into a fresh
// server and dumps them there.
func archiveStreams(t *testing.T, dir string) *sample.Snapshot {
	t.Helper()
	ctx := t.Context()
	if _, err := busarchive.VerifyFile(ctx, filepath.Join(dir, "bus.tar")); err != nil {
		t.Fatalf("archive in %s does not verify: %v", dir, err)
	}
	a, c, err := busarchive.OpenFile(filepath.Join(dir, "bus.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := testbed.New(t, testbed.WithoutKeeper())
	for _, name := range a.Streams() {
		data, err := a.StreamData(name)
		if err != nil {
			t.Fatal(err)
		}
		meta, err := a.StreamMeta(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Bus.Restore(ctx, name, data, meta); err != nil {
			t.Fatalf("restore %s from %s: %v", name, dir, err)
		}
		data.Close()
		meta.Close()
	}
	d, err := sample.Dump(ctx, b.JS, a.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q\n  does not say %q", s, p)
		}
	}
}

func diffKept(e *env, want *sample.Snapshot) string {
	return sample.Diff(want, e.kept())
}
