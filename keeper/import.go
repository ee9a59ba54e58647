package keeper

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/transfer"
)

// ImportKept makes the restore point r names (module, local, form,
// fingerprint, catch-up, caller, why) from `nats backup stream` directories,
// one per stream, as natscli writes them (busarchive.CheckBackupDir says
// which formats are read), the directories read by package transfer.
//
// Every directory is checked whole before anything is written: it decodes
// to its end, its backup.json names its stream, no two name the same
// stream, and each stream is one the kept data is made of (its plan, else
// the naming rule). Then, under the kept data's lease like any verb, the
// archive is written from the directories' files, hashed as it goes (a file
// that changed since it was checked fails it), and committed the one way
// every point is (commitPoint): an earlier point of the same form and
// fingerprint set aside, bus.tar, then point.json, the index record and the
// act. The point holds no consumer positions of its own: each stream's
// snapshot carries its consumers.
//
// It runs where the directories are, in the process of `nats-keeper
// import` with the keeper's store and the bus: the bytes go from the disk
// into the store once, and the keeper's leases on the bus keep it apart
// from any verb of a serving keeper on the same kept data.
func (k *Keeper) ImportKept(ctx context.Context, r Request, dirs []string) (*Reply, error) {
	if err := CheckRequest(VerbImport, r); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("%s/%s f%d-%s", r.Module, r.Local, r.Form, r.Fingerprint)
	refuse := func(err error) (*Reply, error) {
		return nil, fmt.Errorf("%s refused: restore point %s was not imported: %w, so nothing was written", VerbImport, what, err)
	}
	backups, streams, err := transfer.CheckBackups(ctx, r, dirs, k.candidates)
	if err != nil {
		return refuse(err)
	}
	ctx, release, err := k.lock(ctx, VerbImport, r, streams...)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := k.unfinished(ctx, VerbImport, r.Module, r.Local); err != nil {
		return nil, err
	}
	// The plan may have changed while the directories were read.
	names, _, err := k.candidates(ctx, r.Module, r.Local)
	if err != nil {
		return refuse(err)
	}
	for _, s := range streams {
		if !contains(names, s) {
			return refuse(Errorf(ErrConflict, "the plan of %s/%s changed while the directories were checked: it no longer names stream %s", r.Module, r.Local, s))
		}
	}
	fail := func(err error) (*Reply, error) {
		err = fmt.Errorf("restore point %s was not imported: %w", what, err)
		k.record(ctx, Act{Verb: VerbImport, Module: r.Module, Local: r.Local, Caller: r.Caller, Why: r.Why,
			What: err.Error(), Outcome: "failed"})
		return nil, err
	}
	var size int64
	for _, b := range backups {
		size += b.DataSize
	}
	if err := k.checkRoom(ctx, size, 0); err != nil {
		return fail(err)
	}
	rel := layout.PointRel(r.Module, r.Local, r.Form, r.Fingerprint)
	e := k.prepareReplace(ctx, r, rel)
	defer e.abandon(ctx)
	m, w, err := k.writeArchive(ctx, rel, streams, transfer.FromBackups(backups), "", 1, // its files are read one stream after the other
		Progress{Verb: VerbImport, Module: r.Module, Local: r.Local, Step: "import", BytesTotal: size}, heldOf(backups))
	if err != nil {
		return fail(withKind(ErrFailed, fmt.Errorf("%w, so no point was written", err)))
	}
	defer w.Abort()
	return k.commitPoint(ctx, VerbImport, r, rel, m, w, nil, nil, e, fail, func(p *Point) string {
		return fmt.Sprintf("Imported restore point %s from %d nats backup director%s (%s): %d stream(s), %d message(s), %s, in %s.",
			what, len(dirs), kept.Plural(len(dirs), "y", "ies"), strings.Join(dirs, ", "), len(p.Streams), totalMessages(p.Streams),
			HumanBytes(p.ArchiveSize), k.abs(rel))
	})
}

// heldOf records in the manifest what each directory's snapshot holds
// when it holds fewer messages than its state says (a point's cut,
// exported), as its check counted them.
func heldOf(backups []*busarchive.BackupDir) func(*busarchive.Writer) error {
	return func(w *busarchive.Writer) error {
		for _, b := range backups {
			if b.Held != nil {
				if err := w.SetCut(b.Stream, *b.Held); err != nil {
					return err
				}
			}
		}
		return nil
	}
}
