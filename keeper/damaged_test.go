package keeper_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// A truncated, damaged, missing or foreign archive in the store is refused
// before anything live is touched, by verify-kept and restore-kept alike,
// with a sentence that names the problem.
func TestDamagedObjectsRefusedBeforeAnythingIsTouched(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, e *env, point, other string)
		want   []string
	}{
		{"truncated", func(t *testing.T, e *env, point, _ string) {
			fi, err := os.Stat(point)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(point, fi.Size()-4096); err != nil {
				t.Fatal(err)
			}
		}, []string{"bytes but its record says"}},
		{"byte flipped", func(t *testing.T, e *env, point, _ string) {
			data, err := os.ReadFile(point)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x40
			if err := os.WriteFile(point, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"failed verification"}},
		{"missing", func(t *testing.T, e *env, point, _ string) {
			if err := os.Remove(point); err != nil {
				t.Fatal(err)
			}
		}, []string{"missing from the store"}},
		{"foreign", func(t *testing.T, e *env, point, other string) {
			// Another point's archive, whole and valid, in this one's place.
			data, err := os.ReadFile(other)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(point, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, []string{"failed verification"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			snap := e.snapshot(1, "fp")
			e.change()
			other := e.snapshot(2, "other")
			before := e.kept()
			c.damage(t, e, filepath.Join(snap.Dir, "bus.tar"), filepath.Join(other.Dir, "bus.tar"))
			_, err := e.k.VerifyKept(e.ctx, req(1, "fp"))
			if !errors.Is(err, keeper.ErrDamaged) {
				t.Fatalf("verify-kept: got %v, want damaged", err)
			}
			mustContain(t, err.Error(), c.want...)
			_, err = e.k.RestoreKept(e.ctx, req(1, "fp"))
			if !errors.Is(err, keeper.ErrDamaged) {
				t.Fatalf("restore-kept: got %v, want damaged", err)
			}
			mustContain(t, err.Error(), "nothing was set aside or removed")
			if d := sample.Diff(before, e.kept()); d != "" {
				t.Errorf("a refused restore changed the bus:\n%s", d)
			}
			if ents, _ := os.ReadDir(filepath.Join(e.dir, "aside")); len(ents) != 0 {
				t.Errorf("a refused restore left %d aside entries", len(ents))
			}
			e.removeKept()
			if _, err := e.k.RestoreKept(e.ctx, req(1, "fp")); !errors.Is(err, keeper.ErrDamaged) {
				t.Fatalf("restore-kept into absent data: got %v, want damaged", err)
			}
			for _, s := range e.names.Streams() {
				if _, err := e.js.Stream(e.ctx, s); err == nil {
					t.Errorf("stream %s is on the bus after a refused restore into absent data", s)
				}
			}
		})
	}
}
