package keeper_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/syncbuf"
	"github.com/nats-keeper/nats-keeper/internal/tartest"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// addRandom publishes kib messages of 1 KiB of random bytes to the kept
// data's stream.
func addRandom(t *testing.T, e *env, kib int) {
	t.Helper()
	payload := make([]byte, 1024)
	for i := range kib {
		rand.Read(payload)
		// A stall wait longer than the default 200 ms: on a busy machine
		// the server may take longer to acknowledge 4,000 messages, and the
		// publish would fail as "stalled".
		if _, err := e.js.PublishAsync(fmt.Sprintf("billing.ledger.big.%d", i%50), payload, jetstream.WithStallWait(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-e.ctx.Done():
		t.Fatal(e.ctx.Err())
	}
}

// absentEnv takes a point of the sample kept data and then removes the kept
// data from the bus; the keeper logs at debug level into the returned buffer.
// The kept data's stream gets extraKiB KiB of random messages first, so that
// its data can span several of the restore's read blocks.
func absentEnv(t *testing.T, extraKiB int) (*env, *keeper.Reply, *syncbuf.Buffer) {
	log := &syncbuf.Buffer{}
	e := newEnv(t, func(c *keeper.Config) {
		c.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	addRandom(t, e, extraKiB)
	snap := e.snapshot(1, "fp")
	e.removeKept()
	return e, snap, log
}

// A restore into absent kept data verifies each stream while it is read for
// the server, once, instead of reading the whole point before it too.
func TestRestoreIntoAbsentDataVerifiesWhileRestoring(t *testing.T) {
	e, _, log := absentEnv(t, 0)
	before := log.String()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	mustContain(t, rep.Said, "none of the kept data was live")
	got := log.String()[len(before):]
	if strings.Contains(got, `msg="restore point verified"`) {
		t.Errorf("the point was verified whole before a restore into absent data:\n%s", got)
	}
	for _, s := range e.names.Streams() {
		if !strings.Contains(got, `msg="stream restored and its data verified as it was read" stream=`+s+" ") {
			t.Errorf("no log that stream %s was verified as it was read:\n%s", s, got)
		}
	}
	for _, s := range e.kept().Streams {
		if s.Missing {
			t.Errorf("stream %s is not on the bus after the restore", s.Name)
		}
	}
}

// A damaged point restored into absent kept data fails as damaged and leaves
// nothing of itself on the bus, wherever the damage is.
func TestDamagedPointIntoAbsentDataLeavesNothing(t *testing.T) {
	// In one block (the small sample), in a few (all read ahead before the
	// server has the damage), and in many (the server refuses the damaged
	// chunk before the keeper's hash is done: the error still says damaged).
	for _, c := range []struct {
		where    string
		extraKiB int
	}{{"middle", 0}, {"end", 0}, {"backup.json", 0}, {"middle", 4 << 10}, {"end", 4 << 10}, {"middle", 24 << 10}} {
		where := c.where
		t.Run(fmt.Sprintf("%s/%dKiB", where, c.extraKiB), func(t *testing.T) {
			e, snap, _ := absentEnv(t, c.extraKiB)
			path := filepath.Join(snap.Dir, "bus.tar")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			good := bytes.Clone(b)
			entry := tartest.LargestData(t, b)
			if where == "backup.json" {
				entry = strings.TrimSuffix(entry, "stream.arc.s2") + "backup.json"
			}
			off, size := tartest.DataRange(t, b, entry)
			switch where {
			case "middle":
				b[off+size/2] ^= 0x01
			case "end":
				b[off+size-30] ^= 0x01
			default:
				i := bytes.Index(b[off:off+size], []byte(`"subjects"`))
				b[off+int64(i)+1] ^= 0x20 // the same JSON to Go, not the same bytes
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = e.k.RestoreKept(e.ctx, req(1, "fp"))
			if !errors.Is(err, keeper.ErrDamaged) {
				t.Fatalf("restore-kept of a point damaged in %s: got %v, want damaged", entry, err)
			}
			mustContain(t, err.Error(), entry, "nothing live was touched")
			for _, s := range e.kept().Streams {
				if !s.Missing {
					t.Errorf("stream %s of the damaged point is on the bus", s.Name)
				}
			}
			if ents, _ := os.ReadDir(filepath.Join(e.dir, "aside")); len(ents) != 0 {
				t.Errorf("a failed restore into absent data left %d aside entries", len(ents))
			}
			// The point is untouched by the attempt: undamaged again, it
			// restores.
			if err := os.WriteFile(path, good, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := e.k.RestoreKept(e.ctx, req(1, "fp")); err != nil {
				t.Fatalf("restore-kept of the repaired point: %v", err)
			}
			if d := sample.Diff(archiveStreams(t, snap.Dir), e.kept()); d != "" {
				t.Errorf("the repaired point's restore differs from it:\n%s", d)
			}
		})
	}
}

// When the bus fails a restore before the keeper's own check of the data is
// done (the server refused the damaged chunk, say), the keeper verifies the
// point to tell a damaged point from a failed restore.
func TestFailedRestoreOfADamagedPointSaysDamaged(t *testing.T) {
	e, f := faultEnv(t)
	addRandom(t, e, 4<<10) // several read blocks: the bus fails in the first
	snap := e.snapshot(1, "fp")
	e.removeKept()
	path := filepath.Join(snap.Dir, "bus.tar")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entry := tartest.LargestData(t, b)
	off, size := tartest.DataRange(t, b, entry)
	b[off+size/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.op, f.nth, f.upto, f.armed = "restore", 1, 3, true // the bus reads 2,000 bytes and fails
	f.mu.Unlock()
	_, err = e.k.RestoreKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrDamaged) || !errors.Is(err, errInjected) {
		t.Fatalf("restore-kept of a damaged point whose restore failed first: got %v, want the failure and damaged", err)
	}
	mustContain(t, err.Error(), "the point is damaged", entry, "nothing live was touched")
	for _, s := range e.kept().Streams {
		if !s.Missing {
			t.Errorf("stream %s of the damaged point is on the bus", s.Name)
		}
	}
}

// A restore into absent kept data whose journal cannot be recorded restores
// nothing.
func TestRestoreIntoAbsentDataNeedsItsJournal(t *testing.T) {
	e, f := faultEnv(t)
	e.snapshot(1, "fp")
	e.removeKept()
	f.mu.Lock()
	f.op, f.nth, f.armed = "put:journal", 1, true
	f.mu.Unlock()
	_, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if !errors.Is(err, keeper.ErrFailed) || !errors.Is(err, errInjected) {
		t.Fatalf("restore-kept without its journal: got %v, want the failure", err)
	}
	mustContain(t, err.Error(), "restore journal", "nothing was restored")
	for _, s := range e.kept().Streams {
		if !s.Missing {
			t.Errorf("stream %s is on the bus though the restore had no journal", s.Name)
		}
	}
}

// A dry run verifies the whole point even when none of the kept data is
// live, so it says beforehand that a damaged point would fail.
func TestDryRunIntoAbsentDataVerifiesThePoint(t *testing.T) {
	e, snap, log := absentEnv(t, 0)
	r := req(1, "fp")
	r.DryRun = true
	if _, err := e.k.RestoreKept(e.ctx, r); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if !strings.Contains(log.String(), `msg="restore point verified"`) {
		t.Errorf("the dry run did not verify the point whole:\n%s", log.String())
	}
	path := filepath.Join(snap.Dir, "bus.tar")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off, size := tartest.DataRange(t, b, tartest.LargestData(t, b))
	b[off+size/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.RestoreKept(e.ctx, r); !errors.Is(err, keeper.ErrDamaged) {
		t.Fatalf("dry run of a damaged point: got %v, want damaged", err)
	}
	for _, s := range e.kept().Streams {
		if !s.Missing {
			t.Errorf("stream %s is on the bus after a dry run", s.Name)
		}
	}
}
