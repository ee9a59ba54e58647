package keeper_test

import (
	"slices"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

// TestEveryVerbHasAHandler: the keeper runs every verb of the table, and
// none the table lacks.
func TestEveryVerbHasAHandler(t *testing.T) {
	table, handled := kept.VerbNames(), keeper.HandledVerbs()
	slices.Sort(table)
	slices.Sort(handled)
	if !slices.Equal(table, handled) {
		t.Fatalf("the table's verbs are %v, the keeper handles %v", table, handled)
	}
}
