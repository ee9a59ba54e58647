package keeper_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestCollidingBusNamesNeverInterleave: shop/a_b and shop_a/b are both the
// stream shop_a_b. While a restore of one runs, a restore or snapshot of
// the other is refused (409) with a sentence that names the stream and the
// kept data that holds it.
func TestCollidingBusNamesNeverInterleave(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e := newEnv(t, func(c *keeper.Config) {
		c.StepHook = func(step string) {
			if step == "journal-written" {
				once.Do(func() { close(held); <-release })
			}
		}
	})
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "shop_a_b", Subjects: []string{"shop.ab.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.Publish(e.ctx, "shop.ab.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	one := keeper.Request{Module: "shop", Local: "a_b", Form: 1, Fingerprint: "fp", Caller: "one", Why: "test"}
	other := keeper.Request{Module: "shop_a", Local: "b", Form: 1, Fingerprint: "fp", Caller: "other", Why: "test"}
	for _, r := range []keeper.Request{one, other} {
		if _, err := e.k.SnapshotKept(e.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { _, err := e.k.RestoreKept(e.ctx, one); done <- err }()
	<-held
	for name, call := range map[string]func(keeper.Request) (*keeper.Reply, error){
		"restore-kept":  func(r keeper.Request) (*keeper.Reply, error) { return e.k.RestoreKept(e.ctx, r) },
		"snapshot-kept": func(r keeper.Request) (*keeper.Reply, error) { return e.k.SnapshotKept(e.ctx, r) },
	} {
		_, err := call(other)
		if !errors.Is(err, keeper.ErrBusy) {
			t.Errorf("%s of shop_a/b while shop/a_b restores: got %v, want busy", name, err)
			continue
		}
		mustContain(t, err.Error(), "shares its stream", "shop_a_b", "of shop/a_b", "nothing was done")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the restore of shop/a_b: %v", err)
	}
	if _, err := e.k.RestoreKept(e.ctx, other); err != nil {
		t.Fatalf("the restore of shop_a/b after the other ended: %v", err)
	}
}

// TestDryRunNamesASubjectOverlap: a stream that took the point's subjects
// meanwhile makes the restore fail at the server's first chunk; the dry run
// and the restore say so first, naming it, and nothing is set aside.
func TestDryRunNamesASubjectOverlap(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	if err := e.js.DeleteStream(e.ctx, e.names.Stream); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "intruder", Subjects: []string{module + "." + local + ".orders.*"}}); err != nil {
		t.Fatal(err)
	}
	before := e.kept()
	for _, dry := range []bool{true, false} {
		r := req(1, "fp")
		r.DryRun = dry
		_, err := e.k.RestoreKept(e.ctx, r)
		if !errors.Is(err, keeper.ErrConflict) {
			t.Fatalf("restore (dry run %v) over an overlapping stream: got %v, want a conflict", dry, err)
		}
		mustContain(t, err.Error(), "stream intruder", "overlaps", "nothing was set aside or removed")
	}
	if d := diffKept(e, before); d != "" {
		t.Errorf("the refused restore changed the kept data:\n%s", d)
	}
	if list, _ := e.k.ListKept(e.ctx, keeper.Request{}); len(list.Asides) != 0 {
		t.Errorf("the refused restore set %d aside(s)", len(list.Asides))
	}
}
