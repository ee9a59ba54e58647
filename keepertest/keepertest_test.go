package keepertest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keepertest"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a guard against hanging
	t.Cleanup(cancel)
	return ctx
}

// kvOf makes module's KV bucket <module>_<local> holding key=value.
func kvOf(t *testing.T, ctx context.Context, k *keepertest.Keeper, bucket string, replicas int, key, value string) jetstream.KeyValue {
	t.Helper()
	js, err := k.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, key, value); err != nil {
		t.Fatal(err)
	}
	return kv
}

func value(t *testing.T, ctx context.Context, kv jetstream.KeyValue, key string) string {
	t.Helper()
	e, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return string(e.Value())
}

// snapshotChangeRestore takes a point of shop/orders, changes the bucket,
// restores, and checks the value is back and the change was set aside.
func snapshotChangeRestore(t *testing.T, ctx context.Context, k *keepertest.Keeper, kv jetstream.KeyValue) {
	t.Helper()
	req := kept.Request{Module: "shop", Local: "orders", Form: 1, Fingerprint: "v2", Caller: t.Name()}
	if _, err := k.Client.SnapshotKept(ctx, req); err != nil {
		t.Fatalf("snapshot-kept: %v", err)
	}
	if _, err := kv.PutString(ctx, "o1", "changed"); err != nil {
		t.Fatal(err)
	}
	req.Why = "test"
	rep, err := k.Client.RestoreKept(ctx, req)
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	if rep.Aside == nil {
		t.Fatalf("the restore set nothing aside: %s", rep.Said)
	}
	if got := value(t, ctx, kv, "o1"); got != "new" {
		t.Fatalf("after the restore o1 = %q, want %q", got, "new")
	}
}

func TestStartServesAKeeper(t *testing.T) {
	k := keepertest.Start(t)
	ctx := testCtx(t)
	if len(k.Servers) != 1 || !strings.HasPrefix(k.URL, "nats://127.0.0.1:") || k.Conn == nil || k.Store == nil {
		t.Fatalf("harness %+v", k)
	}
	if k.Prefix != verbs.DefaultPrefix || k.Bucket != "kept" {
		t.Fatalf("prefix %q, bucket %q", k.Prefix, k.Bucket)
	}
	if !strings.HasPrefix(k.Store.Describe().URL, "file://") {
		t.Fatalf("store %s, want a file store", k.Store.Describe().URL)
	}
	snapshotChangeRestore(t, ctx, k, kvOf(t, ctx, k, "shop_orders", 1, "o1", "new"))
	// The keeper answers the micro discovery protocol at its version.
	msg, err := k.Conn.Request("$SRV.INFO."+verbs.ServiceName, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg.Data), keepertest.Version) {
		t.Fatalf("$SRV.INFO lacks the version %s: %s", keepertest.Version, msg.Data)
	}
}

// Close stops everything New started and removes its directory.
func TestCloseStopsEverything(t *testing.T) {
	k, err := keepertest.New()
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimPrefix(k.Store.Describe().URL, "file://")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the store's directory: %v", err)
	}
	watch, err := nats.Connect(k.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if !k.Conn.IsClosed() {
		t.Error("the connection is open after Close")
	}
	if k.Servers[0].Running() {
		t.Error("the server runs after Close")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store's directory %s is still there after Close: %v", dir, err)
	}
}

func TestWithPrefixAndBucket(t *testing.T) {
	k := keepertest.Start(t, keepertest.WithPrefix("acme.keeper"), keepertest.WithBucket("acme_kept"))
	ctx := testCtx(t)
	if k.Client.Prefix() != "acme.keeper" {
		t.Fatalf("client prefix %q", k.Client.Prefix())
	}
	snapshotChangeRestore(t, ctx, k, kvOf(t, ctx, k, "shop_orders", 1, "o1", "new"))
	js, err := k.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	idx, err := js.KeyValue(ctx, "acme_kept")
	if err != nil {
		t.Fatalf("the index bucket acme_kept: %v", err)
	}
	if _, err := idx.Get(ctx, "point.shop.orders.1.v2"); err != nil {
		t.Fatalf("the index lacks the point: %v", err)
	}
	if _, err := verbs.NewClient(k.Conn).ListKept(ctx, kept.Request{}); !errors.Is(err, kept.ErrNoBus) {
		t.Fatalf("a client on the default prefix got %v, want no keeper there", err)
	}
}

// WithStoreURL puts the points in another harness's object store.
func TestWithStoreURL(t *testing.T) {
	vault := keepertest.Start(t)
	k := keepertest.Start(t, keepertest.WithStoreURL(vault.URL+"/points"))
	ctx := testCtx(t)
	if got := k.Store.Describe().Kind; got != "nats" {
		t.Fatalf("store kind %q, want nats", got)
	}
	snapshotChangeRestore(t, ctx, k, kvOf(t, ctx, k, "shop_orders", 1, "o1", "new"))
	js, err := vault.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	os, err := js.ObjectStore(ctx, "points")
	if err != nil {
		t.Fatalf("the vault has no object store points: %v", err)
	}
	infos, err := os.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, i := range infos {
		found = found || strings.HasPrefix(i.Name, "points/shop/orders/f1-v2/")
	}
	if !found {
		t.Fatalf("the vault's object store holds no object of the point: %d objects", len(infos))
	}
}

func TestWithCluster(t *testing.T) {
	k := keepertest.Start(t, keepertest.WithCluster())
	ctx := testCtx(t)
	if len(k.Servers) != keepertest.ClusterSize || strings.Count(k.URL, ",") != keepertest.ClusterSize-1 {
		t.Fatalf("%d servers, URL %s", len(k.Servers), k.URL)
	}
	kv := kvOf(t, ctx, k, "shop_orders", 3, "o1", "new")
	snapshotChangeRestore(t, ctx, k, kv)
	js, err := k.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "KV_shop_orders")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("the restored stream has %d replicas, want 3", r)
	}
}

// logT is a test whose Log is recorded.
type logT struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

func (l *logT) Log(args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range args {
		l.logs = append(l.logs, a.(string))
	}
}

func (l *logT) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.logs, "\n")
}

func TestWithTestLog(t *testing.T) {
	lt := &logT{TB: t}
	keepertest.Start(lt, keepertest.WithTestLog())
	if got := lt.text(); !strings.Contains(got, "keeper: INFO index rebuilt from the store") || !strings.Contains(got, "store=file://") {
		t.Fatalf("the test's log lacks the keeper's start:\n%s", got)
	}
	quiet := &logT{TB: t}
	keepertest.Start(quiet)
	if got := quiet.text(); got != "" {
		t.Fatalf("without WithTestLog the keeper logged:\n%s", got)
	}
}
