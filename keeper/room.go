package keeper

import (
	"context"
	"fmt"
	"syscall"

	"github.com/nats-keeper/nats-keeper/store"
)

// roomMargin is what a snapshot needs free beyond the kept data's stored
// bytes: a little for the archive's own entries and manifest, and room for
// the file system to breathe.
const roomMargin = 64 << 20

// checkRoom refuses up front an archive of stored bytes (a point's or an
// aside's) that cannot fit, so that nothing is written; spool is what its
// snapshot may spool (see spoolBound):
//   - a store that can tell its free space (the file store, with statfs)
//     must have the kept data's stored bytes (an archive is about as big,
//     less where the server compresses) plus 5% and roomMargin free;
//   - when the streams are taken at once, every stream but the first may
//     wait in the spool for its turn in the archive (see spool.go), so the
//     spool's file system must have room for those too: counted with the
//     store's need when the spool is on the store's own file system,
//     checked on its own when it is not.
//
// Remote stores tell no free space, and are not checked.
func (k *Keeper) checkRoom(ctx context.Context, stored, spool int64) error {
	need := stored + stored/20 + roomMargin
	if spool > 0 {
		shared := false
		if d, ok := k.store.(store.DiskSharer); ok {
			var err error
			if shared, err = d.SharesDisk(k.spoolDir); err != nil {
				k.log.Warn("whether the spool shares the store's disk could not be told; it is counted apart", "spool", k.spoolDir, "err", err)
			}
		}
		if shared {
			need += spool
		} else if err := k.checkSpoolRoom(spool); err != nil {
			return err
		}
	}
	fs, ok := k.store.(store.FreeSpacer)
	if !ok {
		return nil
	}
	free, err := fs.FreeSpace(ctx)
	if err != nil {
		k.log.Warn("the store's free space could not be told; the snapshot goes ahead", "store", k.store.Describe().URL, "err", err)
		return nil
	}
	if free < need {
		return Errorf(ErrFailed, "the store %s has %s free and this needs about %s (the kept data's %s stored, plus a margin%s), so nothing was written; free some space (prune-kept, discard-aside) or give the keeper a bigger store",
			k.store.Describe().URL, HumanBytes(free), HumanBytes(need), HumanBytes(stored), spoolNote(spool))
	}
	return nil
}

// spoolBound is the most a snapshot of live may spool: nothing when its
// streams are taken one after the other, else every stream's stored bytes
// but the first's (the first is written into the archive as it arrives).
func (k *Keeper) spoolBound(live []StreamInfo) int64 {
	if k.parallel <= 1 || len(live) <= 1 || k.spoolDir == "" {
		return 0
	}
	return storedBytes(live[1:])
}

// spoolNote names the spool's part of a need, when there is one.
func spoolNote(spool int64) string {
	if spool > 0 {
		return fmt.Sprintf(", and up to %s spooled while the streams are taken at once", HumanBytes(spool))
	}
	return ""
}

// checkSpoolRoom refuses a snapshot whose spool may need more than the
// spool directory's file system has free (statfs; a spool on a file system
// that cannot tell is not checked).
func (k *Keeper) checkSpoolRoom(spool int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(k.spoolDir, &st); err != nil {
		k.log.Warn("the spool's free space could not be told; the snapshot goes ahead", "spool", k.spoolDir, "err", err)
		return nil
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if need := spool + roomMargin; free < need {
		return Errorf(ErrFailed, "the spool directory %s has %s free and taking the streams at once may spool about %s, so nothing was written; free some space there or run the keeper with --stream-parallel 1",
			k.spoolDir, HumanBytes(free), HumanBytes(need))
	}
	return nil
}
