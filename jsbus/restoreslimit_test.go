package jsbus_test

import "testing"

// A server of its own takes one restore at a time (nats-server 2.15.3's
// restore there reads the account's streams without its lock; see
// MaxRestoresAtOnce); the cluster case is in TestClusterSnapshotRestoreKeepsReplicas.
func TestOneRestoreAtATimeOnAServerOfItsOwn(t *testing.T) {
	b := newBus(t)
	if got := b.a.MaxRestoresAtOnce(); got != 1 {
		t.Errorf("a server of its own bounds restores at once to %d, want 1", got)
	}
}
