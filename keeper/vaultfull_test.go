package keeper_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/natsstore"
)

// vaultNames lists every object in the vault's bucket, hidden parts
// included: a refused write must leave none of its own.
func vaultNames(t *testing.T, vjs jetstream.JetStream) []string {
	t.Helper()
	obs, err := vjs.ObjectStore(t.Context(), "vault")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return out
}

// A vault object store too small for a point: with the bucket's max_bytes
// below what the point needs, snapshot-kept is refused before anything is
// written, naming the store and the room; with a server whose own storage
// runs out part way (which no client is told beforehand), the write fails
// with the store full, and nothing of it is left. Either way the earlier
// point of the same form and fingerprint is intact and the bus as it was.
func TestVaultTooSmallForThePoint(t *testing.T) {
	vopts := natstest.Options(t.TempDir())
	vopts.JetStreamMaxStore = 12 << 20
	_, _, vjs := jstest.Start(t, vopts)
	e := newEnv(t, func(c *keeper.Config) {
		st, err := natsstore.Open(t.Context(), vjs, "vault", natsstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.Store = st
	})
	addRandom(t, e, 3072)
	e.snapshot(1, "fp")
	live := e.kept()
	before := vaultNames(t, vjs)

	// The bucket's max_bytes: told up front, nothing written.
	stream, err := vjs.Stream(e.ctx, "OBJ_vault")
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	cfg.MaxBytes = int64(stream.CachedInfo().State.Bytes) + 1<<20
	if _, err := vjs.UpdateStream(e.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	_, err = e.k.SnapshotKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("a point over the bucket's max_bytes: %v, want a failure", err)
	}
	mustContain(t, err.Error(), "was not taken", "the store nats://", "vault", "free and this needs about", "so nothing was written")
	checkVaultAsBefore(t, e, vjs, before, live)

	// The server's own storage, part way.
	cfg.MaxBytes = -1
	if _, err := vjs.UpdateStream(e.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	addRandom(t, e, 16384) // its second part finds the server full, before the earlier point is set aside
	live = e.kept()
	_, err = e.k.SnapshotKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrFailed) || !errors.Is(err, store.ErrFull) {
		t.Fatalf("a point over the server's storage: %v, want a failure for want of room", err)
	}
	mustContain(t, err.Error(), "was not taken", "the store nats://", "has no room left for it", "needs about")
	checkVaultAsBefore(t, e, vjs, before, live)
}

func checkVaultAsBefore(t *testing.T, e *env, vjs jetstream.JetStream, before []string, live *sample.Snapshot) {
	t.Helper()
	if got := vaultNames(t, vjs); !slices.Equal(got, before) {
		t.Errorf("the vault holds %v after the refusal, before it %v", got, before)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(1, "fp")); err != nil {
		t.Errorf("the earlier point after the refusal: %v", err)
	}
	if d := diffKept(e, live); d != "" {
		t.Errorf("the refusal changed the bus:\n%s", d)
	}
}
