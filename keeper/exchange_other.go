//go:build !linux

package keeper

import (
	"errors"
	"os"
)

// exchange swaps the directories a and b. Off Linux there is no atomic swap:
// b is moved to b.old, a to b, and b.old to a; a crash in between leaves b.old,
// which holds the complete earlier point.
func exchange(a, b string) error {
	old := b + ".old"
	if err := os.Rename(b, old); err != nil {
		return err
	}
	if err := os.Rename(a, b); err != nil {
		return errors.Join(err, os.Rename(old, b))
	}
	return os.Rename(old, a)
}
