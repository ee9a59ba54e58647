package shape_test

import (
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/shape"
	"github.com/nats-keeper/nats-keeper/kept"
)

const mod = "github.com/nats-keeper/nats-keeper"

// TestRestoreKeptReadsTopToBottom follows a restore-kept from the
// service's handler through the engine (see the package doc for the rules)
// and logs the walk, stop by stop, with the returns to a file left.
func TestRestoreKeptReadsTopToBottom(t *testing.T) {
	w, err := shape.Follow(shape.Config{
		Dir: "../..", Module: mod, Lines: 20,
		Start: mod + "/verbs.Service.handler",
		Verb:  kept.VerbRestore,
		Verbs: kept.VerbNames(),
		Impl:  map[string]string{mod + "/verbs.Engine": mod + "/keeper.Keeper"},
		// The function values a restore-kept is called through: the
		// service's handlers (built by verbs.handlers around the engine's
		// Handle), the engine's table of handlers, the verb's check.
		Calls: map[string]string{
			mod + "/verbs.Service.handlers": mod + "/verbs.handlers",
			mod + "/keeper.handlers":        mod + "/keeper.Keeper.RestoreKept",
			mod + "/kept.Verb.check":        mod + "/kept.checkRestore",
		},
		Skip: []string{mod + "/jsbus", mod + "/store", mod + "/busarchive", mod + "/agecrypt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", w)
	for _, r := range w.Returns {
		t.Log("return to a file left:", r)
	}
	// A reader follows a restore-kept through its files in order and never
	// comes back to one: each orchestrator's file holds nothing the walk
	// visits after it leaves, and each phase's functions sit together.
	if len(w.Returns) > 0 {
		t.Errorf("the walk of a restore-kept returns %d time(s) to a file it had left (%v): "+
			"a reader of the restore now goes back to a file; move the function that brings it back "+
			"into the file of its phase, next to the ones the walk visits with it", len(w.Returns), w.Returns)
	}
	if len(w.Stops) < 40 {
		t.Errorf("the walk made %d stops: it lost its way before the engine's restore", len(w.Stops))
	}
}
