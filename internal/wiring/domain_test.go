package wiring_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// hubAndLeaf starts a hub (JetStream domain hub) and a leafnode server
// (domain leaf) connected to it, and connects to each.
func hubAndLeaf(t *testing.T) (hub, leaf *nats.Conn) {
	t.Helper()
	ho := natstest.Options(t.TempDir())
	ho.JetStreamDomain = "hub"
	ho.LeafNode.Host, ho.LeafNode.Port = "127.0.0.1", -1
	hs := natstest.Start(t, ho)
	lo := natstest.Options(t.TempDir())
	lo.JetStreamDomain = "leaf"
	remote, err := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", ho.LeafNode.Port))
	if err != nil {
		t.Fatal(err)
	}
	lo.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}
	ls := natstest.Start(t, lo)
	for deadline := time.Now().Add(time.Minute); hs.NumLeafNodes() != 1 || ls.NumLeafNodes() != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the leafnode never connected to the hub")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return natstest.Connect(t, hs), natstest.Connect(t, ls)
}

// startOn starts a keeper through wiring.Start on nc, its file store in a
// temporary directory, its log in the returned buffer.
func startOn(t *testing.T, nc *nats.Conn, s wiring.Setup) (*wiring.Keeper, *syncbuf.Buffer) {
	t.Helper()
	st := testbed.FileStore(t, t.TempDir())
	logs := &syncbuf.Buffer{}
	s.Store, s.Logger = st, slog.New(slog.NewTextHandler(logs, nil))
	k, err := wiring.Start(context.Background(), nc, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop() })
	return k, logs
}

// TestKeeperOfAnotherDomain: a keeper connected to the hub with
// JSDomain "leaf" (serve --js-domain leaf) keeps its index and acts in the
// leaf's JetStream, snapshots the leaf's kept data and restores it after a
// change, exactly as it was; the hub's JetStream holds none of it. A
// second keeper on the same prefix that reaches the hub's domain warns at
// start, and says so in its service metadata (nats micro info).
func TestKeeperOfAnotherDomain(t *testing.T) {
	const module, local = "edge", "orders"
	ctx := context.Background()
	hub, leaf := hubAndLeaf(t)
	ljs, err := jetstream.New(leaf)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(ctx, ljs, module, local); err != nil {
		t.Fatal(err)
	}
	names := sample.NamesOf(module, local)
	before, err := sample.Dump(ctx, ljs, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}

	k, _ := startOn(t, hub, wiring.Setup{JSDomain: "leaf"})
	if md := k.Service.Info().Metadata; md["js-domain"] != "leaf" || md["index"] != "kept" || md["conflict"] != "" {
		t.Fatalf("the leaf keeper's metadata: %v", md)
	}
	c := verbs.NewClient(hub, verbs.WithTimeout(2*time.Minute))
	req := kept.Request{Module: module, Local: local, Form: 1, Fingerprint: "pre-release", Caller: "test"}
	if _, err := c.SnapshotKept(ctx, req); err != nil {
		t.Fatalf("snapshot of the leaf's data from the hub: %v", err)
	}
	if err := sample.Change(ctx, ljs, module, local); err != nil {
		t.Fatal(err)
	}
	req.Why = "roll back the leaf"
	full := req
	full.Method = kept.MethodFull // the point exactly, last sequences too
	rep, err := c.RestoreKept(ctx, full)
	if err != nil || rep.Aside == nil {
		t.Fatalf("restore of the leaf's data from the hub: %v %+v", err, rep)
	}
	after, err := sample.Dump(ctx, ljs, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, after); d != "" {
		t.Fatalf("the leaf's data after the restore differs from the point:\n%s", d)
	}
	if _, err := ljs.KeyValue(ctx, "kept"); err != nil {
		t.Errorf("the leaf keeper's index is not in the leaf's JetStream: %v", err)
	}
	var verbsSeen []string
	if err := jsbus.ReadActsIn(ctx, hub, "leaf", verbs.DefaultPrefix, time.Time{}, func(sa jsbus.StoredAct) error {
		if sa.Bad == nil {
			verbsSeen = append(verbsSeen, sa.Act.Verb)
		}
		return nil
	}); err != nil || !slices.Contains(verbsSeen, kept.VerbSnapshot) || !slices.Contains(verbsSeen, kept.VerbRestore) {
		t.Errorf("the leaf keeper's acts, read from the hub in domain leaf: %v %v", verbsSeen, err)
	}
	hjs, err := jetstream.New(hub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hjs.KeyValue(ctx, "kept"); err == nil {
		t.Error("the leaf keeper made its index in the hub's JetStream")
	}

	// A keeper of the hub's own domain does not see the leaf's kept data,
	// and says where it looked.
	startOn(t, hub, wiring.Setup{Prefix: "hub-keeper", Bucket: "kept-hub"})
	_, err = verbs.NewClient(hub, verbs.WithPrefix("hub-keeper")).SnapshotKept(ctx, req)
	if !errors.Is(err, kept.ErrNotFound) || !strings.Contains(err.Error(), "in the connected server's JetStream domain") ||
		!strings.Contains(err.Error(), "needs a keeper started with --js-domain") {
		t.Fatalf("a hub keeper's snapshot of the leaf's kept data: %v", err)
	}

	k2, logs := startOn(t, hub, wiring.Setup{})
	md := k2.Service.Info().Metadata
	if md["js-domain"] != "" || !strings.Contains(md["conflict"], "keeps JetStream domain leaf and index kept") ||
		!strings.Contains(md["conflict"], "give each domain's keeper its own --prefix") {
		t.Fatalf("the hub keeper's metadata does not name the leaf keeper on its prefix: %v", md)
	}
	if !strings.Contains(logs.String(), "another keeper answers this keeper's prefix with another JetStream domain or index") {
		t.Fatalf("the hub keeper did not warn:\n%s", logs.String())
	}
}
