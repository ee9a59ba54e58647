package transfer

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// copyKeyIndexes copies the key indexes the record rec names
// (kept.StreamSum.KeyIndex), from src in from to rel in to (src is rel but
// for an incremental point, whose key indexes are its moment's point's),
// as they are stored (encrypted ones as
// ciphertext: no key is needed), each checked against the size and
// checksum its record names. One already in the target with that size and
// checksum is left as it is. A key index missing from the source, or not
// as its record names it, fails the copy of the point, with why.
func copyKeyIndexes(ctx context.Context, from, to store.Store, src, rel string, rec *kept.Point) error {
	for _, s := range rec.Streams {
		ki := s.KeyIndex
		if ki == nil {
			continue
		}
		if err := layout.CheckKeyIndex(s.Name, ki, rec); err != nil {
			return err
		}
		key := rel + "/" + ki.Object
		if dst, err := to.Stat(ctx, key); err == nil && dst.Size == ki.Size && (dst.Sum == "" || dst.Sum == ki.Sum) {
			continue
		}
		info, err := store.CopyObject(ctx, from, src+"/"+ki.Object, to, key)
		if err != nil {
			return fmt.Errorf("its key index of stream %s was not copied: %w", s.Name, err)
		}
		if info.Size != ki.Size || info.Sum != ki.Sum {
			return fmt.Errorf("the copy of its key index of stream %s is %d bytes with checksum %s, but its record says %d bytes with checksum %s",
				s.Name, info.Size, info.Sum, ki.Size, ki.Sum)
		}
	}
	return nil
}
