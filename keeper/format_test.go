package keeper_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// A journal of a newer format, left by a newer keeper beside this one, holds
// back only its own kept data, with a sentence that names the keeper to run;
// a plan of a newer format is refused the same way, and every other kept data
// is served.
func TestNewerFormatHoldsBackOnlyItsOwn(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "f1")
	newer := `{"module":"` + module + `","local":"` + local + `","aside":"x","point":"points/x","format":3,"written-by":"2.0.0","step":"restore","reposition":[]}`
	if err := e.bus.Put(e.ctx, "journal."+module+"."+local, []byte(newer)); err != nil {
		t.Fatal(err)
	}
	r := req(1, "f1")
	_, err := e.k.RestoreKept(e.ctx, r)
	want := "restore journal journal." + module + "." + local + " was written by a newer keeper (format 3, this keeper reads up to 2); run nats-keeper 2.0.0 or newer"
	if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore under a newer journal: %v\nwant it to say %q", err, want)
	}
	// Recovery leaves it waiting, with the same sentence, and no error of its own.
	rec, err := e.k.Recover(e.ctx)
	if err != nil || len(rec) != 1 || rec[0].State != keeper.RecoveryWaits || rec[0].Err == nil || !strings.Contains(rec[0].Err.Error(), want) {
		t.Fatalf("recovery beside a newer journal: %+v, %v\nwant it waiting, saying %q", rec, err, want)
	}
	if rep, err := e.k.ListKept(e.ctx, keeper.Request{}); err != nil || len(rep.Points) != 1 {
		t.Fatalf("list-kept beside a newer journal: %+v, %v", rep, err)
	}
	if err := e.bus.Put(e.ctx, "plan.other.data", []byte(`{"module":"other","local":"data","streams":["X"],"format":4}`)); err != nil {
		t.Fatal(err)
	}
	_, err = e.k.ShowPlan(e.ctx, keeper.Request{Module: "other", Local: "data"})
	if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "(format 4, this keeper reads up to 3); run a newer nats-keeper") {
		t.Fatalf("show-plan of a newer plan: %v", err)
	}
}

// A point whose point.json a newer keeper wrote (a newer format) is neither
// removed from the index nor rewritten by this keeper's rebuild: its record
// stays as the newer keeper left it.
func TestRebuildLeavesANewerFormatAlone(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	file := filepath.Join(e.dir, "points", module, local, "f1-fp", "point.json")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["format"], m["written-by"] = 4, "2.0.0"
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	key := "point." + module + "." + local + ".1.fp"
	before, err := e.bus.Get(e.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	written, removed, err := e.k.Rebuild(e.ctx)
	if err != nil || written != 0 || removed != 0 {
		t.Fatalf("rebuild beside a newer point: wrote %d, removed %d, %v; want 0 and 0", written, removed, err)
	}
	after, err := e.bus.Get(e.ctx, key)
	if err != nil || string(after) != string(before) {
		t.Fatalf("the newer point's record after a rebuild: %q, %v; want it as it was", after, err)
	}
}
