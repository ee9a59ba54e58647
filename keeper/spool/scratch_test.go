package spool

import (
	"path/filepath"
	"testing"

	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/storetest"
)

// A scratch store keeps the store contract while it is open, and leaves
// nothing in its directory.
func TestScratchContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		dir := filepath.Join(t.TempDir(), "spool")
		if err := OpenDir(dir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { noFiles(t, dir) })
		return NewScratch(dir)
	})
}
