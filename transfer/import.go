package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

// Candidates gives the streams the kept data module/local is made of, and
// whether its plan named them (else the naming rule did): the engine's
// answer, asked once the directories' number is known to be right.
type Candidates func(ctx context.Context, module, local string) (names []string, planned bool, err error)

// CheckBackups checks every directory whole (busarchive.CheckBackupDir) and
// that its stream is one of the kept data's (candidates), and returns them
// with their streams, in the order given. Its error wraps kept.ErrBadRequest
// and names every directory refused. It is import-kept's first step, before
// anything is written (Keeper.ImportKept).
func CheckBackups(ctx context.Context, r kept.Request, dirs []string, candidates Candidates) ([]*busarchive.BackupDir, []string, error) {
	switch {
	case len(dirs) == 0:
		return nil, nil, kept.Errorf(kept.ErrBadRequest, "no nats backup directory was given")
	case len(dirs) > kept.MaxPlanStreams:
		return nil, nil, kept.Errorf(kept.ErrBadRequest, "%d directories were given, over the %d streams a kept data may have", len(dirs), kept.MaxPlanStreams)
	}
	names, planned, err := candidates(ctx, r.Module, r.Local)
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
		case !slices.Contains(names, b.Stream):
			problems = append(problems, fmt.Sprintf("%s: it is a backup of stream %s, which is not a stream of kept data %s/%s (made of %s %s)",
				d, b.Stream, r.Module, r.Local, strings.Join(names, ", "), rule))
			continue
		case slices.Contains(streams, b.Stream):
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
		return nil, nil, kept.Errorf(kept.ErrBadRequest, "%s", strings.Join(problems, "; "))
	}
	return out, streams, nil
}

// FromBackups feeds each stream from its checked directory: the data file
// read again and hashed as it goes, refused at its end if it is not the
// file that was checked, and the backup.json bytes that were checked. It is
// what the engine's archive writer takes a stream's snapshot from.
func FromBackups(bs []*busarchive.BackupDir) func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
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
