package verbs_test

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
)

// guardBed is a harness with module shop's KV bucket shop_orders holding
// o1=v1.
type guardBed struct {
	k   *keepertest.Keeper
	kv  jetstream.KeyValue
	ctx context.Context
	req verbs.GuardRequest
}

func newGuardBed(t *testing.T) *guardBed {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a guard against hanging
	t.Cleanup(cancel)
	k := keepertest.Start(t, keepertest.WithTestLog())
	js, err := k.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "shop_orders"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "o1", "v1"); err != nil {
		t.Fatal(err)
	}
	return &guardBed{k: k, kv: kv, ctx: ctx,
		req: verbs.GuardRequest{Module: "shop", Local: "orders", Form: 1, Fingerprint: "v2", CatchUp: "orders-1-to-2", Caller: t.Name()}}
}

func (b *guardBed) o1(t *testing.T) string {
	t.Helper()
	e, err := b.kv.Get(b.ctx, "o1")
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value())
}

// migrate sets o1 to v2, as a migration would.
func (b *guardBed) migrate(ctx context.Context) error {
	_, err := b.kv.PutString(ctx, "o1", "v2")
	return err
}

// asides lists the asides of shop/orders.
func (b *guardBed) asides(t *testing.T) []kept.Aside {
	t.Helper()
	rep, err := b.k.Client.ListKept(b.ctx, kept.Request{Module: "shop", Local: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Asides
}

func TestGuardSuccessKeepsTheChange(t *testing.T) {
	b := newGuardBed(t)
	var seen *kept.Point
	res, err := b.k.Client.Guard(b.ctx, b.req, func(ctx context.Context) error {
		seen = verbs.GuardPoint(ctx)
		return b.migrate(ctx)
	})
	if err != nil {
		t.Fatalf("guard: %v", err)
	}
	if seen == nil || seen.Module != "shop" || seen.Form != 1 || seen.Fingerprint != "v2" || seen.Dir != "points/shop/orders/f1-v2" {
		t.Fatalf("the change saw the point %+v", seen)
	}
	if !res.Ran || res.Restored != nil || res.Failed != "" || res.Point == nil || !strings.Contains(res.Said, "not restored") {
		t.Fatalf("result %+v", res)
	}
	if got := b.o1(t); got != "v2" {
		t.Fatalf("o1 = %q after a successful change, want v2", got)
	}
	if a := b.asides(t); len(a) != 0 {
		t.Fatalf("a successful change left asides: %+v", a)
	}
	if verbs.GuardPoint(b.ctx) != nil {
		t.Fatal("GuardPoint outside Guard is not nil")
	}
}

func TestGuardFailureRestores(t *testing.T) {
	b := newGuardBed(t)
	broken := errors.New("step 2 of 3 failed")
	res, err := b.k.Client.Guard(b.ctx, b.req, func(ctx context.Context) error {
		if err := b.migrate(ctx); err != nil {
			return err
		}
		return broken
	})
	var ge *verbs.GuardError
	if !errors.As(err, &ge) || !errors.Is(err, broken) || ge.Restore != nil {
		t.Fatalf("guard returned %v, want a GuardError wrapping the change's error", err)
	}
	if res.Restored == nil || res.Aside == "" || res.CatchUp != "orders-1-to-2" || res.Failed != broken.Error() || res.RestoreError != "" {
		t.Fatalf("result %+v", res)
	}
	for _, want := range []string{"failed (step 2 of 3 failed)", "restored", res.Aside, "run orders-1-to-2 next"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q lacks %q", err, want)
		}
	}
	if got := b.o1(t); got != "v1" {
		t.Fatalf("o1 = %q after the restore, want v1", got)
	}
	asides := b.asides(t)
	if len(asides) != 1 || asides[0].ID != res.Aside || asides[0].Why != "guard: step 2 of 3 failed" {
		t.Fatalf("asides %+v, want %s with why %q", asides, res.Aside, "guard: step 2 of 3 failed")
	}
}

// No point, no change: a snapshot that fails never runs the change.
func TestGuardWithoutAPointDoesNotRun(t *testing.T) {
	b := newGuardBed(t)
	b.req.Local = "missing" // shop/missing has no data on the bus
	ran := false
	res, err := b.k.Client.Guard(b.ctx, b.req, func(context.Context) error { ran = true; return nil })
	if err == nil || ran || res.Ran || res.Point != nil {
		t.Fatalf("guard without a point: err %v, ran %v, result %+v", err, ran, res)
	}
	if !errors.Is(err, kept.ErrNotFound) || !strings.Contains(err.Error(), "so the change did not run") {
		t.Fatalf("error %v", err)
	}
	b.req.Fingerprint = "not plain!"
	if _, err := b.k.Client.Guard(b.ctx, b.req, func(context.Context) error { ran = true; return nil }); !errors.Is(err, kept.ErrBadRequest) || ran {
		t.Fatalf("a bad request: err %v, ran %v", err, ran)
	}
}

// A change cut short by its context is restored, unless NoRestoreOnCancel.
func TestGuardOnCancel(t *testing.T) {
	for _, noRestore := range []bool{false, true} {
		b := newGuardBed(t)
		b.req.NoRestoreOnCancel = noRestore
		b.req.Fingerprint = map[bool]string{false: "restore", true: "norestore"}[noRestore]
		ctx, cancel := context.WithCancel(b.ctx)
		res, err := b.k.Client.Guard(ctx, b.req, func(ctx context.Context) error {
			if err := b.migrate(ctx); err != nil {
				return err
			}
			cancel() // a signal arrives mid-change
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) || !res.Cancelled {
			t.Fatalf("NoRestoreOnCancel %v: err %v, result %+v", noRestore, err, res)
		}
		want := map[bool]string{false: "v1", true: "v2"}[noRestore]
		if got := b.o1(t); got != want {
			t.Fatalf("NoRestoreOnCancel %v: o1 = %q, want %q", noRestore, got, want)
		}
		if noRestore && (res.Restored != nil || !strings.Contains(res.Said, "not restored, as asked") ||
			!strings.Contains(res.Said, "restore-kept shop orders --form 1 --before norestore")) {
			t.Fatalf("result %+v", res)
		}
		if !noRestore && res.Restored == nil {
			t.Fatalf("result %+v", res)
		}
	}
}

// A change that panics is restored, and the panic goes on.
func TestGuardPanicRestores(t *testing.T) {
	b := newGuardBed(t)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the change's panic", p)
			}
		}()
		_, _ = b.k.Client.Guard(b.ctx, b.req, func(ctx context.Context) error {
			if err := b.migrate(ctx); err != nil {
				return err
			}
			panic("boom")
		})
		t.Fatal("Guard returned after the change panicked")
	}()
	if got := b.o1(t); got != "v1" {
		t.Fatalf("o1 = %q after a panicking change, want v1", got)
	}
	if a := b.asides(t); len(a) != 1 || a[0].Why != "guard: panicked: boom" {
		t.Fatalf("asides %+v", a)
	}
}

// When the restore fails too, both errors are returned and the result says
// how to restore by hand.
func TestGuardRestoreFailsToo(t *testing.T) {
	b := newGuardBed(t)
	broken := errors.New("broken")
	res, err := b.k.Client.Guard(b.ctx, b.req, func(ctx context.Context) error {
		// The point disappears from the store, so it cannot be restored.
		if err := b.k.Store.Delete(ctx, verbs.GuardPoint(ctx).Dir+"/point.json"); err != nil {
			return err
		}
		return broken
	})
	var ge *verbs.GuardError
	if !errors.As(err, &ge) || !errors.Is(err, broken) || ge.Restore == nil || !errors.Is(err, kept.ErrNotFound) {
		t.Fatalf("guard returned %v, want the change's error and the restore's", err)
	}
	if res.Restored != nil || res.RestoreError == "" || !strings.Contains(res.Said, "restoring the point failed too") {
		t.Fatalf("result %+v", res)
	}
}
