package jsbus_test

import (
	"errors"
	"testing"

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
}
