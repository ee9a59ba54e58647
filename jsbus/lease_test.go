package jsbus_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

func TestIndexCompareAndSet(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	a := b.a
	rev, err := a.Create(ctx, "lease.m.l", []byte("one"))
	if err != nil || rev == 0 {
		t.Fatalf("create: %d %v", rev, err)
	}
	if _, err := a.Create(ctx, "lease.m.l", []byte("two")); !errors.Is(err, keeper.ErrExists) {
		t.Fatalf("second create: got %v, want ErrExists", err)
	}
	v, got, err := a.GetRev(ctx, "lease.m.l")
	if err != nil || got != rev || string(v) != "one" {
		t.Fatalf("get: %q %d %v", v, got, err)
	}
	if _, err := a.Update(ctx, "lease.m.l", []byte("x"), rev+100); !errors.Is(err, keeper.ErrRevision) {
		t.Fatalf("update at a wrong revision: got %v, want ErrRevision", err)
	}
	rev2, err := a.Update(ctx, "lease.m.l", []byte("three"), rev)
	if err != nil || rev2 <= rev {
		t.Fatalf("update: %d %v", rev2, err)
	}
	if err := a.DeleteRev(ctx, "lease.m.l", rev); !errors.Is(err, keeper.ErrRevision) {
		t.Fatalf("delete at an old revision: got %v, want ErrRevision", err)
	}
	if err := a.DeleteRev(ctx, "lease.m.l", rev2); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, _, err := a.GetRev(ctx, "lease.m.l"); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := a.Create(ctx, "lease.m.l", []byte("again")); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	if err := a.DeleteRev(ctx, "lease.m l", 1); err == nil || !strings.Contains(err.Error(), "invalid key") {
		t.Fatalf("removing an invalid key: got %v, want the invalid key refused", err)
	}
}

// A lease this adapter released is taken again with one write over the
// delete marker it left (jetstream's Create takes a failed write, a read
// and a write): watched on the wire, the second take is one publish to the
// key's subject and no API request.
func TestLeaseTakenAgainInOneRequest(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	watch, err := nats.Connect(b.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	sub, err := watch.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	seen := func() (puts, api []string) {
		t.Helper()
		if err := watch.Flush(); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := sub.NextMsg(200 * time.Millisecond)
			if err != nil {
				return puts, api
			}
			switch {
			case strings.HasPrefix(m.Subject, "$KV.kept.lease.m.l"):
				puts = append(puts, m.Subject)
			case strings.HasPrefix(m.Subject, "$JS.API."):
				api = append(api, m.Subject)
			}
		}
	}

	rev, err := b.a.Create(ctx, "lease.m.l", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.a.DeleteRev(ctx, "lease.m.l", rev); err != nil {
		t.Fatal(err)
	}
	seen()
	rev2, err := b.a.Create(ctx, "lease.m.l", []byte("two"))
	if err != nil || rev2 <= rev {
		t.Fatalf("taking the lease again: revision %d (first %d), %v", rev2, rev, err)
	}
	if puts, api := seen(); len(puts) != 1 || len(api) != 0 {
		t.Fatalf("taking a released lease again sent %d write(s) %v and %d API request(s) %v, want 1 and 0", len(puts), puts, len(api), api)
	}
	if v, got, err := b.a.GetRev(ctx, "lease.m.l"); err != nil || got != rev2 || string(v) != "two" {
		t.Fatalf("the lease holds %q at %d (%v), want \"two\" at %d", v, got, err, rev2)
	}
	if _, err := b.a.Create(ctx, "lease.m.l", []byte("three")); !errors.Is(err, keeper.ErrExists) {
		t.Fatalf("taking a held lease: got %v, want ErrExists", err)
	}
}

// The marker a keeper remembers is stale once another keeper took and
// released the lease, or holds it: the first keeper still takes a free lease
// (the general way) and is refused a held one.
func TestLeaseMarkerWrittenOverByAnotherKeeper(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	nc2, err := nats.Connect(b.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	other, err := jsbus.New(ctx, nc2, jsbus.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	take := func(a *jsbus.Adapter, value string) uint64 {
		t.Helper()
		rev, err := a.Create(ctx, "lease.m.l", []byte(value))
		if err != nil {
			t.Fatalf("taking the lease as %q: %v", value, err)
		}
		return rev
	}
	release := func(a *jsbus.Adapter, rev uint64) {
		t.Helper()
		if err := a.DeleteRev(ctx, "lease.m.l", rev); err != nil {
			t.Fatal(err)
		}
	}
	release(b.a, take(b.a, "first"))       // b.a remembers its marker
	release(other, take(other, "other's")) // and another keeper writes over it
	rev := take(b.a, "first again")        // stale marker: taken the general way
	if v, got, err := b.a.GetRev(ctx, "lease.m.l"); err != nil || got != rev || string(v) != "first again" {
		t.Fatalf("the lease holds %q at %d (%v), want \"first again\" at %d", v, got, err, rev)
	}
	release(b.a, rev)
	held := take(other, "held by the other") // b.a's marker is stale again, and the lease held
	if _, err := b.a.Create(ctx, "lease.m.l", []byte("mine")); !errors.Is(err, keeper.ErrExists) {
		t.Fatalf("taking a lease another keeper holds: got %v, want ErrExists", err)
	}
	if v, got, err := b.a.GetRev(ctx, "lease.m.l"); err != nil || got != held || string(v) != "held by the other" {
		t.Fatalf("the lease holds %q at %d (%v), want the other keeper's at %d", v, got, err, held)
	}
}
