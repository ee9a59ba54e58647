package keeper_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestLeftoversSweptWhenOld: an archive whose record (its commit mark) is
// missing holds no point; a keeper that starts removes it once it is older
// than an hour, and leaves a younger one (a write in progress) alone, as it
// leaves every committed point.
func TestLeftoversSweptWhenOld(t *testing.T) {
	e := newEnv(t)
	snap := e.snapshot(1, "fp")
	e.snapshot(2, "kept")
	leftover := filepath.Join(filepath.Dir(snap.Dir), "f1-fp", "point.json")
	if err := os.Remove(leftover); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(snap.Dir, "bus.tar")
	start := func(now time.Time) {
		t.Helper()
		_, err := e.keeperOn(e.dir, func(c *keeper.Config) { c.Now = func() time.Time { return now } })
		if err != nil {
			t.Fatal(err)
		}
	}
	start(time.Now())
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("a young leftover was swept: %v", err)
	}
	start(time.Now().Add(2 * time.Hour))
	if _, err := os.Stat(archive); !os.IsNotExist(err) {
		t.Fatalf("an old leftover archive is still there: %v", err)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(2, "kept")); err != nil {
		t.Fatalf("the committed point beside it: %v", err)
	}
}
