package kept_test

import (
	"errors"
	"testing"

	"github.com/nats-keeper/nats-keeper/kept"
)

// TestVerbTable: every verb of the table has a name once and a line of
// doc, and a request check that refuses an empty request's missing names
// or passes it, but never says the verb is unknown.
func TestVerbTable(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range kept.Verbs() {
		if v.Name == "" || v.Doc == "" || seen[v.Name] {
			t.Errorf("verb %q: empty name or doc, or given twice", v.Name)
		}
		seen[v.Name] = true
		if got, ok := kept.LookupVerb(v.Name); !ok || got.Name != v.Name {
			t.Errorf("LookupVerb(%q) = %q, %v", v.Name, got.Name, ok)
		}
		if err := kept.CheckFields(v.Name, kept.Request{}); err != nil && !errors.Is(err, kept.ErrBadRequest) {
			t.Errorf("%s: an empty request gave %v, not a bad request", v.Name, err)
		}
	}
	if _, ok := kept.LookupVerb("no-such-verb"); ok {
		t.Error("LookupVerb found a verb the table lacks")
	}
}

// TestKindCodes: each kind maps to its wire and exit code, and the wire
// code back to the kind (a busy conflict to ErrBusy).
func TestKindCodes(t *testing.T) {
	for _, c := range []struct {
		kind       error
		wire, exit int
	}{
		{kept.ErrBadRequest, 400, 2}, {kept.ErrNotFound, 404, 3}, {kept.ErrBusy, 409, 4}, {kept.ErrConflict, 409, 4},
		{kept.ErrLocked, 423, 7}, {kept.ErrFailed, 500, 1}, {kept.ErrNoBus, 503, 5}, {kept.ErrDenied, 403, 6}, {kept.ErrCutShort, 504, 8},
	} {
		err := kept.Errorf(c.kind, "a sentence")
		if got := kept.WireCode(err); got != c.wire {
			t.Errorf("WireCode(%v) = %d, want %d", c.kind, got, c.wire)
		}
		if got := kept.ExitCode(err); got != c.exit {
			t.Errorf("ExitCode(%v) = %d, want %d", c.kind, got, c.exit)
		}
		if got := kept.KindOfWire(c.wire, c.kind == kept.ErrBusy); got != c.kind {
			t.Errorf("KindOfWire(%d) = %v, want %v", c.wire, got, c.kind)
		}
	}
	if kept.WireCode(nil) != 200 || kept.ExitCode(nil) != 0 || kept.WireCode(errors.New("x")) != 500 || kept.ExitCode(errors.New("x")) != 1 {
		t.Error("nil or an error of no kind is mapped wrong")
	}
}
