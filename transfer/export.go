package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/archives"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// Export names what ExportKept writes out and where: the restore point of
// Module/Local at Form before Fingerprint, or, with Aside, that aside.
type Export struct {
	Module, Local string
	Form          int
	Fingerprint   string
	Aside         string // an aside id instead of a point
	To            string // the target directory: new, or empty
	// Unseal decrypts an encrypted archive (the keeper's --identity); an
	// encrypted point or aside is refused without it (kept.ErrLocked).
	Unseal *agecrypt.Opener
	// Compose composes the archive of an incremental point whose moment's
	// point no keeper made yet; nil refuses such a point.
	Compose Composer
}

// ExportReport says what ExportKept wrote.
type ExportReport struct {
	Said    string                      `json:"said"`
	From    string                      `json:"from"` // the point's or aside's place in the store
	To      string                      `json:"to"`
	Streams []busarchive.ExportedStream `json:"streams"`
}

// ExportKept writes one `nats backup stream` directory per stream of a
// point or an aside, To/<stream>/ holding stream.arc.s2 and backup.json, as
// natscli writes them, so `nats backup restore stream To/<stream>` and
// `nats backup validate` take them. Each byte is checked against the
// archive's manifest as it is written, and nothing is visible at To until
// every stream is whole (busarchive.ExportDirs). It reads the store only:
// no index, no bus, no act, so it runs wherever the store can be read.
func ExportKept(ctx context.Context, st store.Store, e Export) (*ExportReport, error) {
	rel, err := exportRel(e)
	if err != nil {
		return nil, fmt.Errorf("export refused: %w, so nothing was exported", err)
	}
	where := st.Describe().URL + "/" + rel
	_, rec, err := layout.ReadRecord(ctx, st, rel)
	if errors.Is(err, store.ErrNotFound) {
		return nil, kept.Errorf(kept.ErrNotFound, "there is no %s in %s, so nothing was exported", exportWhat(e), st.Describe().URL)
	}
	if err != nil {
		return nil, kept.Errorf(kept.ErrFailed, "the record of %s does not read (%v), so nothing was exported", where, err)
	}
	if rec.Incremental {
		// Its archive is the point of its moment once a keeper made it;
		// until then it is composed from its base and segments.
		mrel, mrec, err := momentOf(ctx, st, rec, where)
		if errors.Is(err, kept.ErrNotFound) && e.Compose != nil {
			return exportComposed(ctx, st, e, rec, where)
		}
		if err != nil {
			return nil, kept.WithKind(kept.ErrFailed, fmt.Errorf("%w, so nothing was exported", err))
		}
		rel, rec = mrel, mrec
	}
	a, err := openForExport(ctx, st, rel, rec, e.Unseal)
	if err != nil {
		return nil, kept.WithKind(kept.ErrFailed, fmt.Errorf("%w, so nothing was exported", err))
	}
	defer a.Close()
	streams, err := a.ExportDirs(ctx, e.To)
	if err != nil {
		return nil, exportFailed(err, where, e.To)
	}
	said := fmt.Sprintf("Exported %s from %s to %s: %s, each checked against its manifest as it was written.",
		exportWhat(e), where, e.To, exportedDirs(streams))
	if rec.Encrypted != nil {
		said += " The archive is encrypted at rest; it was decrypted with --identity, so the directories hold plain data."
	}
	return &ExportReport{Said: said, From: where, To: e.To, Streams: streams}, nil
}

// openForExport opens the archive an export reads, decrypting it with
// unseal when it is encrypted.
func openForExport(ctx context.Context, st store.Store, rel string, rec *kept.Point, unseal *agecrypt.Opener) (*archives.Opened, error) {
	return archives.Open(ctx, st, rel, rec, st.Describe().URL+"/"+layout.ArchiveKeyOf(rel, rec), unseal)
}

// exportRel checks e's names and gives the store prefix it reads.
func exportRel(e Export) (string, error) {
	if e.To == "" {
		return "", kept.Errorf(kept.ErrBadRequest, "no target directory was given")
	}
	if len(e.To) > kept.MaxPathLen {
		return "", kept.Errorf(kept.ErrBadRequest, "the target directory is %d bytes long, over the limit of %d", len(e.To), kept.MaxPathLen)
	}
	if e.Aside != "" {
		if e.Module != "" || e.Local != "" || e.Fingerprint != "" || e.Form != 0 {
			return "", kept.Errorf(kept.ErrBadRequest, "an aside is named by its id alone, not also by module, local, form or fingerprint")
		}
		if _, _, err := kept.ParseAsideID(e.Aside); err != nil {
			return "", err
		}
		return layout.AsideRel(e.Aside), nil
	}
	if err := kept.CheckFields(kept.VerbImport, kept.Request{Module: e.Module, Local: e.Local, Form: e.Form, Fingerprint: e.Fingerprint}); err != nil {
		return "", err
	}
	return layout.PointRel(e.Module, e.Local, e.Form, e.Fingerprint), nil
}

func exportWhat(e Export) string {
	if e.Aside != "" {
		return "aside " + e.Aside
	}
	return fmt.Sprintf("restore point %s/%s f%d-%s", e.Module, e.Local, e.Form, e.Fingerprint)
}

// exportComposed exports the incremental point rec at where, its moment's
// point not made: its archive composed from its base and segments as each
// stream is written out, checked as it is written; nothing is written to
// the store.
func exportComposed(ctx context.Context, st store.Store, e Export, rec *kept.Point, where string) (*ExportReport, error) {
	if err := busarchive.CheckExportTarget(e.To); err != nil {
		return nil, exportFailed(err, where, e.To) // before the base and segments are read
	}
	ca, err := e.Compose(ctx, st, rec)
	if err != nil {
		return nil, kept.WithKind(kept.ErrFailed, fmt.Errorf("%s is an incremental point and its archive could not be composed from its base and segments: %w, so nothing was exported", where, err))
	}
	defer ca.Close()
	streams, err := busarchive.ExportComposed(ctx, e.To, ca.Streams(), ca.Compose)
	if err != nil {
		return nil, exportFailed(err, where+" (composed)", e.To)
	}
	said := fmt.Sprintf("Exported %s from %s to %s: %s. It is an incremental point and no keeper has made the point of its moment yet: its archive was composed as it was written out, %s "+
		"Each stream was decoded and checked against its backup.json as it was written; nothing was written to the store.",
		exportWhat(e), where, e.To, exportedDirs(streams), ca.Said())
	return &ExportReport{Said: said, From: where, To: e.To, Streams: streams}, nil
}

// exportedDirs says how many directories of how many bytes an export wrote.
func exportedDirs(streams []busarchive.ExportedStream) string {
	var n int64
	for _, s := range streams {
		n += s.DataSize
	}
	return fmt.Sprintf("%d nats backup director%s, %s", len(streams), kept.Plural(len(streams), "y", "ies"), kept.HumanBytes(n))
}

// exportFailed is the error of an export of what is at where to the
// directory to: a target that is not empty a conflict, what the checks
// found a damaged archive, else a failure.
func exportFailed(err error, where, to string) error {
	if errors.Is(err, busarchive.ErrTargetExists) {
		return kept.Errorf(kept.ErrConflict, "%v", err)
	}
	if ps := busarchive.Problems(err); len(ps) > 0 {
		err = fmt.Errorf("%w, so nothing was exported to %s", &kept.DamagedError{Path: where, Problems: archives.ProblemSentences(err)}, to)
	}
	return kept.WithKind(kept.ErrFailed, err)
}
