package natsstore

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/store"
)

// limitBucket sets the bucket's max_bytes, as an operator would.
func limitBucket(t *testing.T, s *Store, maxBytes int64) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	info, err := s.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.MaxBytes = maxBytes
	if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// streamState is what the bucket's stream holds: a write that failed must
// leave it as it was (no chunk, part or head left).
func streamState(t *testing.T, s *Store) (msgs, bytes uint64) {
	t.Helper()
	info, err := s.stream.Info(testCtx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs, info.State.Bytes
}

// The bucket tells its room: unlimited without max_bytes, and max_bytes
// less what it holds once one is set.
func TestFreeSpaceIsTheBucketsRoom(t *testing.T) {
	s := open(t, single(t), "room", Options{})
	ctx := testCtx(t, time.Minute)
	free, err := s.FreeSpace(ctx)
	if err != nil || free != math.MaxInt64 {
		t.Fatalf("free space of an unlimited bucket: %d, %v; want unlimited", free, err)
	}
	if _, err := put(t, ctx, s, "points/a/b/bus.tar", newPattern(1, 3<<20)); err != nil {
		t.Fatal(err)
	}
	limitBucket(t, s, 20<<20)
	_, held := streamState(t, s)
	free, err = s.FreeSpace(ctx)
	if err != nil || free != 20<<20-int64(held) {
		t.Fatalf("free space: %d, %v; want %d (20 MiB less the %d held)", free, err, 20<<20-int64(held), held)
	}
}

// A bucket whose max_bytes is reached part way refuses the write with
// store.ErrFull, at once (it is not tried again), and leaves the bucket as
// it was: no chunk, part or head of the refused object, the earlier object
// whole.
func TestFullBucketRefusesAndLeavesNothing(t *testing.T) {
	s := open(t, single(t), "full", Options{Timeout: 5 * time.Second})
	ctx := testCtx(t, 2*time.Minute)
	earlier := patternBytes(2, 1<<20)
	if _, err := put(t, ctx, s, "points/a/b/f1-x/bus.tar", bytes.NewReader(earlier)); err != nil {
		t.Fatal(err)
	}
	// What a 16 MiB object takes in the stream, its head last: measured
	// on a key of the same length, then removed.
	_, before := streamState(t, s)
	if _, err := put(t, ctx, s, "points/a/b/f1-y/bus.tar", newPattern(3, 16<<20)); err != nil {
		t.Fatal(err)
	}
	_, after := streamState(t, s)
	if err := s.Delete(ctx, "points/a/b/f1-y/bus.tar"); err != nil {
		t.Fatal(err)
	}
	takes := int64(after - before)
	for _, c := range []struct {
		name string
		key  string
		room int64 // beyond what the bucket holds
		size int64
	}{
		{"first part", "points/a/b/f1-x/bus.tar", 1 << 20, 20 << 20},
		{"mid-object", "points/a/b/f1-x/bus.tar", 12 << 20, 30 << 20},
		{"head", "points/a/b/f1-z/bus.tar", takes - 1, 16 << 20}, // both parts fit; the head does not
	} {
		t.Run(c.name, func(t *testing.T) {
			_, held := streamState(t, s)
			limitBucket(t, s, int64(held)+c.room)
			msgs, size := streamState(t, s)
			_, err := put(t, ctx, s, c.key, newPattern(3, c.size))
			if !errors.Is(err, store.ErrFull) {
				t.Fatalf("a write over the bucket's max_bytes: %v, want store.ErrFull", err)
			}
			if errors.Is(err, store.ErrUnavailable) {
				t.Errorf("a full bucket is reported unreachable: %v", err)
			}
			if m, b := streamState(t, s); m != msgs || b != size {
				t.Errorf("the refused write left %d message(s) of %d bytes in the bucket (before: %d of %d); objects: %v", m, b, msgs, size, names(t, s))
			}
			checkObject(t, s, "points/a/b/f1-x/bus.tar", earlier)
		})
	}
}

// checkObject: key holds want, whole.
func checkObject(t *testing.T, s *Store, key string, want []byte) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	o, err := s.Open(ctx, key)
	if err != nil {
		t.Fatalf("the earlier object: %v", err)
	}
	defer o.Close()
	r, err := o.Reader(ctx, 0, o.Size())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the earlier object reads %d bytes (%v), want its %d", len(got), err, len(want))
	}
}

// An account whose JetStream storage limit is reached: FreeSpace tells the
// account's room, and a write beyond it is refused with store.ErrFull,
// leaving nothing.
func TestAccountLimitIsTheBucketsRoom(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(conf, []byte(`
accounts: {
  VAULT: { jetstream: { max_file: 24M, max_mem: 1M }, users: [ { user: vault, password: vault } ] }
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	base := natstest.Options(t.TempDir())
	opts.ServerName, opts.Host, opts.Port, opts.JetStream, opts.StoreDir, opts.NoLog, opts.NoSigs =
		base.ServerName, base.Host, base.Port, true, base.StoreDir, true, true
	srv := natstest.Start(t, opts)
	js, err := jetstream.New(natstest.Connect(t, srv, nats.UserInfo("vault", "vault")))
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, js, "acct", Options{Timeout: 5 * time.Second})
	ctx := testCtx(t, 2*time.Minute)
	earlier := patternBytes(4, 1<<20)
	if _, err := put(t, ctx, s, "aside/x/bus.tar", bytes.NewReader(earlier)); err != nil {
		t.Fatal(err)
	}
	free, err := s.FreeSpace(ctx)
	if err != nil || free <= 0 || free > 23<<20 {
		t.Fatalf("free space under a 24 MiB account limit, 1 MiB stored: %d, %v", free, err)
	}
	msgs, size := streamState(t, s)
	_, err = put(t, ctx, s, "aside/y/bus.tar", newPattern(5, 40<<20))
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("a write over the account's limit: %v, want store.ErrFull", err)
	}
	if m, b := streamState(t, s); m != msgs || b != size {
		t.Errorf("the refused write left %d message(s) of %d bytes (before: %d of %d); objects: %v", m, b, msgs, size, names(t, s))
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 1 || l[0].Key != "aside/x/bus.tar" {
		t.Errorf("objects listed after the refused write: %v (%v), want aside/x/bus.tar alone", l, err)
	}
	checkObject(t, s, "aside/x/bus.tar", earlier)
}
