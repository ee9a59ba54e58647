package keeper

import (
	"context"
	"fmt"
)

// JournalPartPrefix is where the parts of journal bodies lie in the index.
const JournalPartPrefix = journalPartPrefix

// JournalSizes reads the restore journal of module/local from k's index,
// body and all, and returns the bytes of its head and of the same journal
// in the shape keepers wrote before bodies had parts (its body in the
// head, one index value), and how many parts its body has.
func (k *Keeper) JournalSizes(ctx context.Context, module, local string) (head, whole, parts int, err error) {
	j, err := k.readJournal(ctx, module, local)
	if err != nil || j == nil {
		return 0, 0, 0, fmt.Errorf("no readable journal of %s/%s: %v", module, local, err)
	}
	if err := k.journalStore().loadBody(ctx, j); err != nil {
		return 0, 0, 0, err
	}
	if j.body != nil {
		parts = j.body.Parts
	}
	return len(encodeHead(j)), len(oldShape(j)), parts, nil
}

// MakeJournalOld rewrites the restore journal of module/local in the shape
// keepers wrote before bodies had parts, and removes its parts: the
// journal an older keeper leaves when it stops.
func (k *Keeper) MakeJournalOld(ctx context.Context, module, local string) error {
	j, err := k.readJournal(ctx, module, local)
	if err != nil || j == nil {
		return fmt.Errorf("no readable journal of %s/%s: %v", module, local, err)
	}
	if err := k.journalStore().loadBody(ctx, j); err != nil {
		return err
	}
	if err := k.index.Put(ctx, journalKey(module, local), oldShape(j)); err != nil {
		return err
	}
	k.journalStore().removeBody(ctx, j)
	return nil
}

// oldShape is j with its body in its head.
func oldShape(j *journal) []byte {
	old := *j
	old.body, old.bodyAway = nil, false
	return encodeHead(&old)
}
