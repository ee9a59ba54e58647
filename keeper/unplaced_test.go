package keeper_test

import (
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestPositionOnARemovedStreamIsUnplaced: a point taken while the kept
// data's plan named only its KV bucket and object store records the
// positions of the module's consumers on its stream too (the stream was not
// the kept data's then). Once the plan names the stream as well, restoring
// that point sets the stream aside and removes it, and does not bring it
// back: its consumers are not set back on it (they cannot be), the restore
// succeeds and says so, and the aside holds the stream.
func TestPositionOnARemovedStreamIsUnplaced(t *testing.T) {
	e := newEnv(t)
	n := e.names
	if _, err := e.k.SetPlan(e.ctx, keeper.Request{Module: module, Local: local, Streams: []string{n.KVStream, n.ObjStrm}}); err != nil {
		t.Fatal(err)
	}
	snap := e.snapshot(1, "fp")
	recorded := map[string]bool{}
	for _, p := range snap.Point.Positions {
		recorded[p.Stream+"/"+p.Consumer] = true
	}
	if !recorded[n.Stream+"/"+n.Reader] {
		t.Fatalf("the point records %v; want %s on %s", recorded, n.Reader, n.Stream)
	}
	if _, err := e.k.SetPlan(e.ctx, keeper.Request{Module: module, Local: local, Streams: n.Streams()}); err != nil {
		t.Fatal(err)
	}
	rep, err := e.k.RestoreKept(e.ctx, req(1, "fp"))
	if err != nil {
		t.Fatalf("restoring a point that does not carry a stream the kept data now has: %v", err)
	}
	mustContain(t, rep.Said, "not in the point and so is removed", n.Reader+" on "+n.Stream)
	if _, err := e.js.Stream(e.ctx, n.Stream); err == nil {
		t.Fatalf("%s is on the bus after restoring a point without it", n.Stream)
	}
	var held []string
	for _, s := range rep.Aside.Streams {
		held = append(held, s.Name)
	}
	if !strings.Contains(strings.Join(held, ","), n.Stream) {
		t.Fatalf("the aside holds %v; want %s among them", held, n.Stream)
	}
}
