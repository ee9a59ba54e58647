package keeper

import (
	"context"
	"encoding/json"
	"fmt"
)

// A point that an aside's tail follows (StreamSum.Base: a delta restore
// set aside only the messages after the point's last sequence) is needed to
// put that aside back exactly: prune-kept keeps it and discard-point
// refuses it while the aside is there. Discarding the aside frees it.

// tailBases is, for module/local's asides in the index, each point a tail
// follows (its key prefix), with the id of an aside that holds the tail.
func (k *Keeper) tailBases(ctx context.Context, module, local string) (map[string]string, error) {
	out := map[string]string{}
	err := k.listIndex(ctx, "aside."+module+"."+local+".", func(data []byte) error {
		var a Aside
		if json.Unmarshal(data, &a) != nil {
			return nil // not an aside this keeper reads; it holds no tail it wrote
		}
		for _, s := range a.Streams {
			if s.Base != "" {
				out[s.Base] = a.ID
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the asides of %s/%s: %w", module, local, err)
	}
	return out, nil
}
