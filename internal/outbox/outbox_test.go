package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/internal/outbox"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// bed is a real nats-server, the jsbus adapter on it (which makes
// KEEPER_ACTS) and a queue directory.
type bed struct {
	t   *testing.T
	nc  *nats.Conn
	js  jetstream.JetStream
	a   *jsbus.Adapter
	dir string
	log *syncbuf.Buffer
}

func newBed(t *testing.T) *bed {
	t.Helper()
	_, nc, js := jstest.Start(t, nil)
	b := &bed{t: t, nc: nc, js: js, dir: filepath.Join(t.TempDir(), "acts-queue"), log: &syncbuf.Buffer{}}
	b.a = b.adapter()
	return b
}

func (b *bed) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// adapter opens the keeper's state on the bus, making KEEPER_ACTS again
// when it was removed.
func (b *bed) adapter() *jsbus.Adapter {
	b.t.Helper()
	a, err := jsbus.New(context.Background(), b.nc, jsbus.WithLogger(b.logger()), jsbus.WithAttemptTimeout(time.Second))
	if err != nil {
		b.t.Fatal(err)
	}
	return a
}

// open opens the queue on the adapter, with short tries and pauses, and
// closes it when the test ends.
func (b *bed) open(o outbox.Options) *outbox.Queue {
	b.t.Helper()
	o.Try, o.MaxPause, o.Logger = 2*time.Second, time.Second, b.logger()
	q, err := outbox.Open(b.dir, b.a, o)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = q.Close() })
	return q
}

// removeActs removes KEEPER_ACTS: the bus is up but no stream takes acts.
func (b *bed) removeActs() {
	b.t.Helper()
	if err := b.js.DeleteStream(context.Background(), jsbus.DefaultActsStream); err != nil {
		b.t.Fatal(err)
	}
}

// stored is the ids of the acts KEEPER_ACTS holds, in stream order.
func (b *bed) stored() []string {
	b.t.Helper()
	return jstest.ActIDs(jstest.StoredActs(b.t, b.js, jsbus.DefaultActsStream))
}

// queue queues n acts and returns their ids.
func queue(t *testing.T, q *outbox.Queue, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		a := act(i)
		if err := q.Queue(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	return ids
}

func act(i int) keeper.Act {
	return keeper.Act{ID: keeper.NewActID(), Verb: "snapshot-kept", Module: "billing", Local: "ledger", What: fmt.Sprintf("act %d", i),
		Outcome: "done", Time: time.Now().UTC()}
}

func waitEmpty(t *testing.T, q *outbox.Queue) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for q.ActsQueued() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the queue still holds %d acts after two minutes", q.ActsQueued())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func queueFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[de.Name()] = b
	}
	return out
}

// While the bus takes acts, Queue returns with the act on the bus; the
// queue is empty and its directory private.
func TestQueueDeliversAtOnceWhileTheBusTakesActs(t *testing.T) {
	b := newBed(t)
	q := b.open(outbox.Options{})
	var want []string
	for i := range 3 {
		a := act(i)
		if err := q.Queue(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		want = append(want, a.ID)
		if got := b.stored(); !slices.Equal(got, want) {
			t.Fatalf("after Queue of act %d the stream holds %v, want %v", i, got, want)
		}
	}
	if n := q.ActsQueued(); n != 0 {
		t.Errorf("%d acts still queued", n)
	}
	st, err := os.Lstat(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("the queue directory is %04o, want 0700", st.Mode().Perm())
	}
}

// Acts queued while KEEPER_ACTS is gone are on disk (one 0600 file each),
// and arrive in order, each once, when the stream is made again. Replaying
// the queue's files twice afterwards (a keeper that stopped before it took
// them off, started twice on a copy) stores nothing more: each act's id is
// its Nats-Msg-Id, inside the duplicate window.
func TestQueueReplayedTwiceStoresEachActOnce(t *testing.T) {
	b := newBed(t)
	b.removeActs()
	q := b.open(outbox.Options{})
	want := queue(t, q, 5)
	if n := q.ActsQueued(); n != 5 {
		t.Fatalf("%d acts queued while no stream takes them, want 5", n)
	}
	saved := queueFiles(t, b.dir)
	if len(saved) != 5 {
		t.Fatalf("the queue directory holds %d files, want 5: %v", len(saved), slices.Collect(maps.Keys(saved)))
	}
	for name := range saved {
		st, err := os.Lstat(filepath.Join(b.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("queue file %s is %04o, want 0600", name, st.Mode().Perm())
		}
	}

	b.adapter() // KEEPER_ACTS again
	waitEmpty(t, q)
	if got := b.stored(); !slices.Equal(got, want) {
		t.Fatalf("the stream holds %v, want %v (each once, in order)", got, want)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if left := queueFiles(t, b.dir); len(left) != 0 {
		t.Fatalf("delivered acts left files: %v", slices.Collect(maps.Keys(left)))
	}

	for replay := 1; replay <= 2; replay++ {
		for name, data := range saved {
			if err := os.WriteFile(filepath.Join(b.dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		q := b.open(outbox.Options{})
		waitEmpty(t, q)
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if got := b.stored(); !slices.Equal(got, want) {
			t.Fatalf("after replay %d the stream holds %v, want %v", replay, got, want)
		}
	}
	if !strings.Contains(b.log.String(), "act already recorded; the bus kept its first copy") {
		t.Errorf("the replays were not told apart as duplicates in the log:\n%s", b.log)
	}
}

// A full queue drops the next act: Queue says so (ErrFull), it is counted
// and logged at error level with what the act said, and the queue keeps
// what it held.
func TestFullQueueDropsCountsAndLogs(t *testing.T) {
	b := newBed(t)
	b.removeActs()
	q := b.open(outbox.Options{MaxActs: 2})
	for i := range 2 {
		if err := q.Queue(context.Background(), act(i)); err != nil {
			t.Fatal(err)
		}
	}
	third := act(3)
	err := q.Queue(context.Background(), third)
	if !errors.Is(err, outbox.ErrFull) {
		t.Fatalf("the third act in a queue of two: %v, want ErrFull", err)
	}
	if q.ActsDropped() != 1 || q.ActsQueued() != 2 {
		t.Errorf("dropped %d, queued %d; want 1 and 2", q.ActsDropped(), q.ActsQueued())
	}
	log := b.log.String()
	if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "the acts queue is full") || !strings.Contains(log, third.ID) {
		t.Errorf("the drop is not logged at error level with the act's id:\n%s", log)
	}
	// The bytes bound too.
	q.Close()
	q2 := b.open(outbox.Options{MaxActs: 10, MaxBytes: 100})
	if err := q2.Queue(context.Background(), act(4)); !errors.Is(err, outbox.ErrFull) {
		t.Fatalf("an act over the bytes bound: %v, want ErrFull", err)
	}
}

// Record (an intent) never queues: with acts queued and no stream taking
// them it fails and leaves nothing behind; once the stream is back it
// delivers the queued acts first, then itself.
func TestRecordDeliversTheQueueFirstAndNeverQueues(t *testing.T) {
	b := newBed(t)
	b.removeActs()
	q := b.open(outbox.Options{MaxPause: time.Hour}) // the drainer waits; Record delivers
	queued := act(0)
	if err := q.Queue(context.Background(), queued); err != nil {
		t.Fatal(err)
	}
	intent := act(1)
	intent.Outcome = "intent"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := q.Record(ctx, intent); err == nil {
		t.Fatal("an intent was recorded while no stream takes acts")
	}
	if n := q.ActsQueued(); n != 1 {
		t.Fatalf("after a refused intent %d acts are queued, want 1 (the intent is never queued)", n)
	}
	b.adapter()
	if err := q.Record(context.Background(), intent); err != nil {
		t.Fatal(err)
	}
	if got := b.stored(); !slices.Equal(got, []string{queued.ID, intent.ID}) {
		t.Fatalf("the stream holds %v, want the queued act, then the intent", got)
	}
}

// A queue file that does not read as an act is set aside as *.damaged
// (kept, not delivered) and logged at error level, and the acts around it
// are delivered in order; a leftover temporary file goes; a start after
// that says the set-aside file still waits for a person.
func TestDamagedQueueFileIsSetAsideAndLogged(t *testing.T) {
	b := newBed(t)
	b.removeActs()
	q := b.open(outbox.Options{})
	want := queue(t, q, 3)
	q.Close()
	names := slices.Sorted(maps.Keys(queueFiles(t, b.dir)))
	if err := os.WriteFile(filepath.Join(b.dir, names[1]), []byte(`{"format":1,"act":{"id":"x y"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, ".tmp-00000000000000000009.act"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.adapter()
	q = b.open(outbox.Options{})
	waitEmpty(t, q)
	if got := b.stored(); !slices.Equal(got, []string{want[0], want[2]}) {
		t.Fatalf("the stream holds %v, want %v (the damaged one left out)", got, []string{want[0], want[2]})
	}
	left := slices.Sorted(maps.Keys(queueFiles(t, b.dir)))
	if !slices.Equal(left, []string{names[1] + ".damaged"}) {
		t.Fatalf("the queue directory holds %v, want only %s.damaged", left, names[1])
	}
	log := b.log.String()
	if !strings.Contains(log, "does not read as an act; it is set aside") || !strings.Contains(log, names[1]) {
		t.Errorf("the damaged file is not logged:\n%s", log)
	}
	q.Close()
	b.log = &syncbuf.Buffer{}
	q = b.open(outbox.Options{})
	if !strings.Contains(b.log.String(), "set-aside act files wait in the acts queue for a person") {
		t.Errorf("a start with a set-aside file does not say so:\n%s", b.log)
	}
	q.Close()
}

// A queue directory that is a symlink, or open to group or other, is
// refused with a sentence.
func TestQueueDirMustBePrivate(t *testing.T) {
	b := newBed(t)
	real := filepath.Join(t.TempDir(), "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, b.dir); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Open(b.dir, b.a, outbox.Options{}); err == nil || !strings.Contains(err.Error(), "is not a directory (a symlink or a file)") {
		t.Fatalf("a symlinked queue directory: %v", err)
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Open(open, b.a, outbox.Options{}); err == nil || !strings.Contains(err.Error(), "chmod 0700") {
		t.Fatalf("a 0755 queue directory: %v", err)
	}
}

// A queued act the bus refuses as it stands (over the acts stream's 1 MiB
// message size) is set aside and counted as dropped; the act behind it is
// delivered.
func TestActTheBusRefusesIsSetAsideAndCounted(t *testing.T) {
	b := newBed(t)
	q := b.open(outbox.Options{})
	big := act(0)
	big.What = strings.Repeat("x", 1<<20+100)
	if err := q.Queue(context.Background(), big); err != nil {
		t.Fatalf("an act of just over 1 MiB was not kept: %v", err)
	}
	next := queue(t, q, 1)
	waitEmpty(t, q)
	if got := b.stored(); !slices.Equal(got, next) {
		t.Fatalf("the stream holds %v, want only the act behind the refused one", got)
	}
	if q.ActsDropped() != 1 {
		t.Errorf("dropped %d, want 1", q.ActsDropped())
	}
	left := slices.Sorted(maps.Keys(queueFiles(t, b.dir)))
	if len(left) != 1 || !strings.HasSuffix(left[0], ".act.damaged") {
		t.Errorf("the queue directory holds %v, want the refused act set aside", left)
	}
	if !strings.Contains(b.log.String(), "the bus refuses it as it stands") {
		t.Errorf("the refusal is not logged:\n%s", b.log)
	}
}
