package orders_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keepertest"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"

	"example.com/orders"
)

// setup starts a keeper on an embedded server and makes the module's bucket
// with the orders given, at form 1.
func setup(t *testing.T, values map[string]string) (*keepertest.Keeper, jetstream.KeyValue, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a guard against hanging
	t.Cleanup(cancel)
	k := keepertest.Start(t, keepertest.WithTestLog())
	js, err := k.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: orders.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	for key, v := range values {
		if _, err := kv.PutString(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	return k, kv, ctx
}

func contents(t *testing.T, ctx context.Context, kv jetstream.KeyValue) map[string]string {
	t.Helper()
	keys, err := kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got[key] = string(e.Value())
	}
	return got
}

func guardRequest(t *testing.T) verbs.GuardRequest {
	return verbs.GuardRequest{Module: orders.Module, Local: orders.Local, Form: 1, Fingerprint: "orders-v2",
		CatchUp: "orders-migrate-1-to-2", Caller: t.Name()}
}

// The migration fails half-way under guard: guard restores the bucket as it
// was and sets the half-migrated orders aside.
func TestFailedMigrationIsRestored(t *testing.T) {
	before := map[string]string{
		"o1": `{"total": 12.5}`,
		"o2": `{"total": 3}`,
		"o3": `{"note": "no total"}`, // the migration cannot convert it
	}
	k, kv, ctx := setup(t, before)

	res, err := k.Client.Guard(ctx, guardRequest(t), func(ctx context.Context) error { return orders.Migrate(ctx, kv) })
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("guard returned %v, want the migration's error", err)
	}
	if res.Restored == nil || res.Aside == "" || res.CatchUp != "orders-migrate-1-to-2" {
		t.Fatalf("guard did not restore: %s", res.Said)
	}
	got := contents(t, ctx, kv)
	if len(got) != len(before) {
		t.Fatalf("after the restore the bucket holds %v, want %v", got, before)
	}
	for key, v := range before {
		if got[key] != v {
			t.Errorf("after the restore %s = %s, want %s", key, got[key], v)
		}
	}

	// The half-migrated orders were set aside, not lost.
	list, err := k.Client.ListKept(ctx, kept.Request{Module: orders.Module, Local: orders.Local})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Asides) != 1 || list.Asides[0].ID != res.Aside || !strings.HasPrefix(list.Asides[0].Why, "guard: order o3 has no total") {
		t.Fatalf("asides %+v, want %s set aside by guard", list.Asides, res.Aside)
	}
	if len(list.Points) != 1 {
		t.Fatalf("points %+v, want the one guard took", list.Points)
	}
}

// The migration succeeds under guard: the orders are at form 2, nothing is
// set aside, and the point stays for a later restore-kept.
func TestMigrationThatSucceedsIsKept(t *testing.T) {
	k, kv, ctx := setup(t, map[string]string{"o1": `{"total": 12.5}`, "o2": `{"total": 3}`})
	res, err := k.Client.Guard(ctx, guardRequest(t), func(ctx context.Context) error { return orders.Migrate(ctx, kv) })
	if err != nil {
		t.Fatalf("guard: %v", err)
	}
	if res.Restored != nil || res.Point == nil {
		t.Fatalf("result %s", res.Said)
	}
	got := contents(t, ctx, kv)
	if got["o1"] != `{"total_cents":1250}` || got["o2"] != `{"total_cents":300}` {
		t.Fatalf("after the migration the bucket holds %v", got)
	}
	list, err := k.Client.ListKept(ctx, kept.Request{Module: orders.Module, Local: orders.Local})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Asides) != 0 || len(list.Points) != 1 {
		t.Fatalf("points %d, asides %d; want 1 and 0", len(list.Points), len(list.Asides))
	}
}
