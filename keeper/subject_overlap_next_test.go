package keeper_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestOverlapRefusalSaysWhatToDoNext: a "rename" migration made a new
// stream on the point's subjects. The restore's refusal names that stream
// and the request that would set it aside first: an aside-only restore of
// its kept data when it is a kept data's stream the keeper knows, else a
// plan that adds it to the kept data restored.
func TestOverlapRefusalSaysWhatToDoNext(t *testing.T) {
	e := newEnv(t)
	mk := func(name, subject string) {
		t.Helper()
		if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.js.Publish(e.ctx, subject[:len(subject)-1]+"1", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	mk("shop_orders", "shop.orders.>")
	orders := keeper.Request{Module: "shop", Local: "orders", Form: 1, Fingerprint: "fp", Why: "before the rename"}
	if _, err := e.k.SnapshotKept(e.ctx, orders); err != nil {
		t.Fatal(err)
	}
	if err := e.js.DeleteStream(e.ctx, "shop_orders"); err != nil {
		t.Fatal(err)
	}
	mk("orders_v2", "shop.orders.>")
	refusal := func() string {
		t.Helper()
		_, err := e.k.RestoreKept(e.ctx, orders)
		if !errors.Is(err, keeper.ErrConflict) {
			t.Fatalf("restore over the renamed stream: got %v, want a conflict", err)
		}
		return err.Error()
	}
	want := "restore-kept of shop/orders: stream shop_orders of restore point shop/orders f1-fp takes subject shop.orders.>, " +
		"which overlaps subject shop.orders.> of stream orders_v2 on the bus; the server would refuse to restore it; " +
		"stream orders_v2 belongs to no kept data this keeper knows: a plan that adds it to shop/orders makes the restore " +
		"set it aside with the rest, `nats-keeper plan set shop orders shop_orders orders_v2 --why TEXT` (the request " +
		`{"local":"orders","module":"shop","streams":["shop_orders","orders_v2"],"why":"TEXT"} to set-plan), then restore again, ` +
		"so nothing was set aside or removed"
	if got := refusal(); got != want {
		t.Errorf("the refusal for a stream of no kept data:\n got %s\nwant %s", got, want)
	}

	// The new stream is a kept data's own, shop/orders_v2 by the naming rule.
	if err := e.js.DeleteStream(e.ctx, "orders_v2"); err != nil {
		t.Fatal(err)
	}
	mk("shop_orders_v2", "shop.orders.>")
	v2 := keeper.Request{Module: "shop", Local: "orders_v2", Form: 1, Fingerprint: "fp", Why: "after the rename"}
	if _, err := e.k.SnapshotKept(e.ctx, v2); err != nil {
		t.Fatal(err)
	}
	want = "restore-kept of shop/orders: stream shop_orders of restore point shop/orders f1-fp takes subject shop.orders.>, " +
		"which overlaps subject shop.orders.> of stream shop_orders_v2 on the bus; the server would refuse to restore it; " +
		"stream shop_orders_v2 is a stream of kept data shop/orders_v2 (by the naming rule): set it aside first with " +
		"`nats-keeper restore-kept shop orders_v2 --aside-only --why TEXT` (the request " +
		`{"aside-only":true,"local":"orders_v2","module":"shop","why":"TEXT"} to restore-kept), then restore again, ` +
		"so nothing was set aside or removed"
	if got := refusal(); got != want {
		t.Errorf("the refusal for a stream of another kept data:\n got %s\nwant %s", got, want)
	}
	// Doing what it says: the aside-only restore, then the restore passes.
	if _, err := e.k.RestoreKept(e.ctx, keeper.Request{Module: "shop", Local: "orders_v2", AsideOnly: true, Why: "TEXT"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.RestoreKept(e.ctx, orders); err != nil {
		t.Fatalf("the restore after the aside-only the refusal named: %v", err)
	}
}
