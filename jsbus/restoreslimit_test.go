package jsbus_test

import "testing"

// Restores are not bounded by the adapter (it takes their starts one at a
// time instead, see TestManyRestoresAtOnceOnAServerOfItsOwn); the cluster
// case is in TestClusterSnapshotRestoreKeepsReplicas.
func TestNoBoundOfRestoresAtOnceOnAServerOfItsOwn(t *testing.T) {
	b := newBus(t)
	if got := b.a.MaxRestoresAtOnce(); got != 0 {
		t.Errorf("a server of its own bounds restores at once to %d, want no bound (0)", got)
	}
}
