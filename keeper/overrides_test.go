package keeper_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestR3PointIntoASingleServer takes a point of R3 kept data (consumers
// with replicas of their own, 3) on a 3-server cluster, and restores it
// with a keeper on the same store into a single server: without replicas
// the restore is refused before anything is touched, with a sentence that
// says how; the dry run shows the overrides; with replicas 1 the streams
// come back with 1 replica and exactly their content, and their consumers
// with 1 too.
func TestR3PointIntoASingleServer(t *testing.T) {
	ctx := t.Context()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	srvs := natstest.Cluster(t, "keeper", 3)
	nc := natstest.Connect(t, srvs[0])
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := jsbus.New(ctx, nc, jsbus.WithLogger(quiet), jsbus.WithReplicas(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(ctx, js, module, local, sample.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	names := sample.NamesOf(module, local)
	was, err := sample.Dump(ctx, js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := keeper.New(ctx, keeper.Config{Store: fileStore(t, dir), Bus: ad, Index: ad, Acts: ad, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.SnapshotKept(ctx, req(1, "r3")); err != nil {
		t.Fatal(err)
	}

	single := testbed.New(t, testbed.WithoutKeeper(), testbed.WithBusOptions(jsbus.WithLogger(quiet)))
	sjs := single.JS
	ks, err := single.KeeperOn(dir)
	if err != nil {
		t.Fatalf("a keeper on a single server with the cluster keeper's store: %v", err)
	}
	_, err = ks.RestoreKept(ctx, req(1, "r3"))
	if !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("an R3 point into a single server without replicas: got %v, want a refusal", err)
	}
	t.Logf("without replicas: %v", err)
	mustContain(t, err.Error(), "3 replicas", "not clustered", "replicas 1", "--replicas 1")
	streams := sjs.ListStreams(ctx)
	for info := range streams.Info() {
		if strings.Contains(info.Config.Name, local) {
			t.Errorf("the refused restore made stream %s", info.Config.Name)
		}
	}

	r := req(1, "r3")
	r.Replicas, r.DryRun = 1, true
	dry, err := ks.RestoreKept(ctx, r)
	if err != nil {
		t.Fatalf("the dry run with replicas 1: %v", err)
	}
	if dry.Plan == nil || dry.Plan.Overrides == nil || dry.Plan.Overrides.Replicas != 1 {
		t.Fatalf("the dry run does not show the overrides: %+v", dry.Plan)
	}
	r.DryRun = false
	rep, err := ks.RestoreKept(ctx, r)
	if err != nil {
		t.Fatalf("an R3 point into a single server with replicas 1: %v", err)
	}
	mustContain(t, rep.Said, "configuration was changed: replicas 1")
	got, err := sample.Dump(ctx, sjs, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range was.Streams {
		if got.Streams[i].Replicas != 1 {
			t.Errorf("%s restored with %d replicas, want 1", got.Streams[i].Name, got.Streams[i].Replicas)
		}
		was.Streams[i].Replicas = 1
	}
	if d := sample.Diff(was, got); d != "" {
		t.Errorf("the restored streams differ from the R3 point's:\n%s", d)
	}
	for _, s := range names.Streams() {
		st, err := sjs.Stream(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		l := st.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.Config.Replicas > 1 {
				t.Errorf("consumer %s of %s restored with %d replicas", ci.Name, s, ci.Config.Replicas)
			}
		}
	}
}
