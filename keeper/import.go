package keeper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
)

// ImportKept makes the restore point r names (module, local, form,
// fingerprint, catch-up, caller, why) from `nats backup stream` directories,
// one per stream, as natscli writes them (busarchive.CheckBackupDir says
// which formats are read).
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
	backups, streams, err := k.checkBackups(ctx, r, dirs)
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
	m, w, err := k.writeArchive(ctx, rel, streams, fromBackups(backups), "", 1, // its files are read one stream after the other
		Progress{Verb: VerbImport, Module: r.Module, Local: r.Local, Step: "import", BytesTotal: size})
	if err != nil {
		return fail(withKind(ErrFailed, fmt.Errorf("%w, so no point was written", err)))
	}
	defer w.Abort()
	return k.commitPoint(ctx, VerbImport, r, rel, m, w, nil, e, fail, func(p *Point) string {
		return fmt.Sprintf("Imported restore point %s from %d nats backup director%s (%s): %d stream(s), %d message(s), %s, in %s.",
			what, len(dirs), plural(len(dirs), "y", "ies"), strings.Join(dirs, ", "), len(p.Streams), totalMessages(p.Streams),
			HumanBytes(p.ArchiveSize), k.abs(rel))
	})
}

// checkBackups checks every directory whole (busarchive.CheckBackupDir) and
// that its stream is one of the kept data's, and returns them with their
// streams, in the order given. Its error wraps ErrBadRequest and names
// every directory refused.
func (k *Keeper) checkBackups(ctx context.Context, r Request, dirs []string) ([]*busarchive.BackupDir, []string, error) {
	switch {
	case len(dirs) == 0:
		return nil, nil, Errorf(ErrBadRequest, "no nats backup directory was given")
	case len(dirs) > MaxPlanStreams:
		return nil, nil, Errorf(ErrBadRequest, "%d directories were given, over the %d streams a kept data may have", len(dirs), MaxPlanStreams)
	}
	names, planned, err := k.candidates(ctx, r.Module, r.Local)
	if err != nil {
		return nil, nil, err
	}
	rule := "by the naming rule"
	if planned {
		rule = "by its plan"
	}
	var problems []string
	var out []*busarchive.BackupDir
	var streams []string
	for _, d := range dirs {
		b, err := busarchive.CheckBackupDir(ctx, d)
		switch {
		case err != nil:
			problems = append(problems, err.Error())
			continue
		case !contains(names, b.Stream):
			problems = append(problems, fmt.Sprintf("%s: it is a backup of stream %s, which is not a stream of kept data %s/%s (made of %s %s)",
				d, b.Stream, r.Module, r.Local, strings.Join(names, ", "), rule))
			continue
		case contains(streams, b.Stream):
			problems = append(problems, fmt.Sprintf("%s: it is a second backup of stream %s", d, b.Stream))
			continue
		}
		out = append(out, b)
		streams = append(streams, b.Stream)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if len(problems) > 0 {
		return nil, nil, Errorf(ErrBadRequest, "%s", strings.Join(problems, "; "))
	}
	return out, streams, nil
}

// fromBackups feeds each stream from its checked directory: the data file
// read again and hashed as it goes, refused at its end if it is not the
// file that was checked, and the backup.json bytes that were checked.
func fromBackups(bs []*busarchive.BackupDir) streamSource {
	return func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		defer data.Close()
		defer meta.Close()
		var b *busarchive.BackupDir
		for _, x := range bs {
			if x.Stream == stream {
				b = x
			}
		}
		if b == nil {
			return fmt.Errorf("no backup directory holds stream %s", stream)
		}
		f, err := b.OpenData()
		if err != nil {
			return fmt.Errorf("%s: %w", b.Dir, err)
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.CopyBuffer(io.MultiWriter(data, h), &ctxReader{ctx: ctx, r: io.LimitReader(f, b.DataSize+1)}, make([]byte, importBlock))
		if err != nil {
			return fmt.Errorf("copying %s/%s: %w", b.Dir, b.DataName, err)
		}
		if n != b.DataSize || hex.EncodeToString(h.Sum(nil)) != b.DataSum {
			return errors.New(b.Dir + "/" + b.DataName + " changed while it was imported (its size or SHA-256 is not what was checked)")
		}
		_, err = meta.Write(b.Meta)
		return err
	}
}

// importBlock is the size of an import's reads of a backup's data.
const importBlock = 1 << 20

// ctxReader stops reading when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
