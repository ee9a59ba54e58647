package keeper

import (
	"context"
	"fmt"
	"syscall"

	"github.com/nats-keeper/nats-keeper/store"
)

// DefaultFreeMargin is the room a snapshot leaves free beyond its
// estimate of the archive (Config.FreeMargin, serve --free-margin). It
// covers what the estimate does not count: the record beside the archive
// (point.json or aside.json, up to layout.MaxRecordSize with many consumers'
// positions), the archive's own headers and manifest, a file system's
// blocks and metadata beyond the bytes written; and it keeps the file
// system, often shared with the host's logs and the keeper's spool, from
// being filled to its last byte by a snapshot whose streams grew after the
// check. A keeper on a small volume of its own, with small kept data,
// lowers it (to 0 even): a write that still runs out of room fails
// cleanly, leaving nothing, as a full disk always does.
const DefaultFreeMargin = 64 << 20

// marginFlag names the setting that moves the margin, for the refusals.
const marginFlag = "--free-margin"

// checkRoom refuses up front an archive of stored bytes (a point's or an
// aside's) that cannot fit, so that nothing is written; spool is what its
// snapshot may spool (see spoolBound):
//   - a store that can tell its free space (the file store, with statfs)
//     must have the kept data's stored bytes (an archive is about as big,
//     less where the server compresses) plus 5% and the margin
//     (Config.FreeMargin) free;
//   - when the streams are taken at once, every stream but the first may
//     wait in the spool for its turn in the archive (see package spool), so the
//     spool's file system must have room for those too: counted with the
//     store's need when the spool is on the store's own file system,
//     checked on its own when it is not.
//
// Remote stores tell no free space, and are not checked.
func (k *Keeper) checkRoom(ctx context.Context, stored, spool int64) error {
	need := stored + stored/20 + k.freeMargin
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
		return Errorf(ErrFailed, "the store %s has %s free and this needs about %s (the kept data's %s stored, plus a margin of %s%s), so nothing was written; "+
			"free some space (prune-kept, discard-aside), give the keeper a bigger store, or run it with a smaller %s",
			k.store.Describe().URL, HumanBytes(free), HumanBytes(need), HumanBytes(stored), HumanBytes(k.freeMargin), spoolNote(spool), marginFlag)
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
	if need := spool + k.freeMargin; free < need {
		return Errorf(ErrFailed, "the spool directory %s has %s free and taking the streams at once may spool about %s (with a margin of %s), so nothing was written; "+
			"free some space there, run the keeper with --stream-parallel 1, or run it with a smaller %s",
			k.spoolDir, HumanBytes(free), HumanBytes(need), HumanBytes(k.freeMargin), marginFlag)
	}
	return nil
}
