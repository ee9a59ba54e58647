package keeper

import (
	"context"
	"fmt"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// checkAside reads the aside a, written but not yet committed, back from
// the store and verifies it whole, then checks that no stream of its
// manifest m took a new message since its snapshot began: only then may it
// count. It returns the verification's report.
func (k *Keeper) checkAside(ctx context.Context, a *Aside, m *busarchive.Manifest) (*busarchive.Report, error) {
	// Read back from the store and verified whole, before it counts.
	oa, err := k.openArchive(ctx, a.Dir, asidePoint(a))
	if err != nil {
		return nil, fmt.Errorf("the set-aside copy does not verify: %w", err)
	}
	_, rep, err := k.verifyArchive(ctx, oa)
	oa.Close()
	if err != nil {
		return nil, fmt.Errorf("the set-aside copy does not verify: %w", err)
	}
	// Anything written to the live streams after their snapshot began is not
	// in the aside: removing them now would lose it.
	for _, s := range m.Streams {
		si, err := k.bus.Stream(ctx, s.Name)
		if err != nil {
			return nil, fmt.Errorf("looking up stream %s after setting it aside: %w", s.Name, err)
		}
		if si.LastSeq != s.State.LastSeq {
			return nil, Errorf(ErrConflict, "stream %s took new messages while it was being set aside (last sequence %d, now %d); "+
				"stop the module's writers and try again", s.Name, s.State.LastSeq, si.LastSeq)
		}
	}
	return rep, nil
}
