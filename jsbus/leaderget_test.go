package jsbus_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestIndexReadsWhatWasJustWritten writes the index through one server of a
// cluster and reads it back at once through a server that follows the
// bucket's leader, many times: every read gives what was just written (a
// direct get answered by the follower's replica could give the value before
// it). Deleted and purged keys read as missing.
func TestIndexReadsWhatWasJustWritten(t *testing.T) {
	srvs := startCluster(t)
	ctx := testCtx(t)
	nc0 := natstest.Connect(t, srvs[0])
	writer := newAdapter(t, ctx, nc0, jsbus.WithReplicas(3))
	js0, err := jetstream.New(nc0)
	if err != nil {
		t.Fatal(err)
	}
	moveLeader(t, ctx, js0, "KV_"+jsbus.DefaultBucket, srvs[1].Name())
	reader := newAdapter(t, ctx, natstest.Connect(t, srvs[2]), jsbus.WithReplicas(3))
	kv, err := jetstream.New(natstest.Connect(t, srvs[2]))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := kv.KeyValue(ctx, jsbus.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for i := range 300 {
		want := fmt.Sprintf("value %d", i)
		if err := writer.Put(ctx, "plan.rw.x", []byte(want)); err != nil {
			t.Fatal(err)
		}
		if e, err := direct.Get(ctx, "plan.rw.x"); err != nil || string(e.Value()) != want {
			stale++
		}
		got, err := reader.Get(ctx, "plan.rw.x")
		if err != nil || string(got) != want {
			t.Fatalf("read %d through a follower: %q, %v; want %q", i, got, err, want)
		}
		_, rev, err := reader.GetRev(ctx, "plan.rw.x")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := writer.Update(ctx, "plan.rw.x", []byte(want+" again"), rev); err != nil {
			t.Fatalf("update %d at the revision just read: %v", i, err)
		}
	}
	t.Logf("a direct get through the follower was behind the write %d times in 300", stale)

	if err := writer.Delete(ctx, "plan.rw.x"); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Get(ctx, "plan.rw.x"); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("a deleted key: %v, want ErrNotFound", err)
	}
	if err := writer.Put(ctx, "plan.rw.y", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := direct.Purge(ctx, "plan.rw.y"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reader.GetRev(ctx, "plan.rw.y"); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("a purged key: %v, want ErrNotFound", err)
	}
	if _, err := reader.Get(ctx, "plan.never"); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("a key never written: %v, want ErrNotFound", err)
	}
}
