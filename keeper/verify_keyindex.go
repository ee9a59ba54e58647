package keeper

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/keeper/archives"
)

// verifyKeyIndexes checks each key index point p names (snapshot_keyindex.go)
// once its archive a verified: its object against point.json (size,
// checksum), decrypted, decoded, and equal to the index built again from
// the archive's data entry, which is read once more for it. It returns how
// many it checked.
func (k *Keeper) verifyKeyIndexes(ctx context.Context, a *openedArchive, p *Point) (int, error) {
	n := 0
	for _, s := range p.Streams {
		if s.KeyIndex == nil {
			continue
		}
		ix, err := a.KeyIndex(ctx, s.Name)
		if err == nil {
			sm := a.Manifest().Stream(s.Name)
			bucket, object, _ := logicalKind(s.Name, sm.Config.Subjects)
			err = a.CheckKeyIndex(ctx, ix, keepOf(bucket, object))
		}
		if err != nil {
			return n, fmt.Errorf("restore point %s: its archive verifies, but its key index of stream %s does not: %w; "+
				"it restores all the same (a logical restore reads the archive whole instead of through the index)", pointName(p), s.Name, err)
		}
		n++
	}
	return n, nil
}

// checkStoredKeyIndexes checks, without decrypting, that each key index
// point p at rel names is stored as point.json says (size, checksum).
func (k *Keeper) checkStoredKeyIndexes(ctx context.Context, rel string, p *Point) error {
	for _, s := range p.Streams {
		if s.KeyIndex == nil {
			continue
		}
		where := k.abs(rel + "/" + s.KeyIndex.Object)
		if _, err := archives.StoredKeyIndex(ctx, k.store, rel, p, s.Name, where); err != nil {
			return fmt.Errorf("restore point %s: its key index of stream %s is not as point.json names it: %w", pointName(p), s.Name, err)
		}
	}
	return nil
}
