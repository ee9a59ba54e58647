package busarchive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ExportedStream is one stream an export wrote.
type ExportedStream struct {
	Name     string `json:"name"`
	Dir      string `json:"dir"`       // <target>/<stream>
	DataSize int64  `json:"data_size"` // stream.arc.s2's size
}

// ErrTargetExists is an export's target that exists and is not empty.
var ErrTargetExists = errors.New("the export's target directory exists and is not empty")

// ExportDirs writes every stream of the archive as a `nats backup stream`
// directory, target/<stream>/ holding stream.arc.s2 and backup.json, byte
// for byte the archive's entries, which are exactly the files natscli
// writes (see CheckBackupDir). Every byte is checked against the manifest as
// it is written (CheckedStreamData: the data's end is written only once its
// size and SHA-256 match; backup.json is hashed and compared before it is
// written).
//
// Nothing is visible at target until all of it is whole: the directories
// are written into a new sibling of target, each file and directory synced,
// and the sibling renamed to target, then target's parent synced. A
// failure removes the sibling and leaves target as it was. A target that
// exists must be an empty directory, not a symbolic link (else
// ErrTargetExists, or a refusal saying why). Directories are made 0700 and
// files 0600; nothing is followed through a symbolic link.
func (a *Archive) ExportDirs(ctx context.Context, target string) ([]ExportedStream, error) {
	return exportDirs(ctx, target, a.Streams(), a.exportStream)
}

// exportDirs writes target/<stream>/ for each of streams with each (which
// makes the directory dir and writes its two files, synced, and returns
// the data's size), as ExportDirs says.
func exportDirs(ctx context.Context, target string, streams []string, each func(ctx context.Context, stream, dir string) (int64, error)) ([]ExportedStream, error) {
	target = filepath.Clean(target)
	if err := CheckExportTarget(target); err != nil {
		return nil, err
	}
	parent := filepath.Dir(target)
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(target)+".partial-")
	if err != nil {
		return nil, fmt.Errorf("making a directory beside %s to write into: %w, so nothing was exported", target, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	out := make([]ExportedStream, 0, len(streams))
	for _, s := range streams {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("the export to %s stopped before stream %s: %w, so nothing was exported", target, s, err)
		}
		n, err := each(ctx, s, filepath.Join(tmp, s))
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w, so nothing was exported to %s", s, err, target)
		}
		out = append(out, ExportedStream{Name: s, Dir: filepath.Join(target, s), DataSize: n})
	}
	if err := syncDir(tmp); err != nil {
		return nil, fmt.Errorf("syncing the export: %w, so nothing was exported to %s", err, target)
	}
	// rename(2) replaces an empty directory; one that gained entries since
	// it was looked at makes it fail, and nothing is lost.
	if err := os.Rename(tmp, target); err != nil {
		return nil, fmt.Errorf("renaming the export into place: %w, so nothing was exported to %s", err, target)
	}
	ok = true
	if err := syncDir(parent); err != nil {
		return out, fmt.Errorf("the export is whole in %s, but its parent directory could not be synced (%w): a crash now may lose it", target, err)
	}
	return out, nil
}

// CheckExportTarget checks that an export may write target: it does not
// exist, or is an empty directory and not a symbolic link (else
// ErrTargetExists, or a refusal saying why). An export checks it again as
// it begins; this lets a caller refuse before costly work.
func CheckExportTarget(target string) error {
	target = filepath.Clean(target)
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%s "+format+", so nothing was exported", append([]any{target}, args...)...)
	}
	switch st, err := os.Lstat(target); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return refuse("cannot be looked at (%v)", err)
	case st.Mode()&os.ModeSymlink != 0:
		return refuse("is a symbolic link, which is never followed")
	case !st.IsDir():
		return refuse("exists and is not a directory")
	default:
		ents, err := os.ReadDir(target)
		if err != nil {
			return refuse("cannot be read (%v)", err)
		}
		if len(ents) > 0 {
			return fmt.Errorf("%s: %w (it holds %d entries), so nothing was exported; give a new or empty directory", target, ErrTargetExists, len(ents))
		}
	}
	return nil
}

// exportStream writes one stream's directory and returns its data's size.
func (a *Archive) exportStream(ctx context.Context, stream, dir string) (int64, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return 0, err
	}
	data, err := a.CheckedStreamData(ctx, stream)
	if err != nil {
		return 0, err
	}
	n, err := writeNew(filepath.Join(dir, DataName), data)
	data.Close()
	if err != nil {
		return 0, err
	}
	meta, err := a.checkedMeta(stream)
	if err != nil {
		return 0, err
	}
	if _, err := writeNew(filepath.Join(dir, MetaName), meta); err != nil {
		return 0, err
	}
	return n, syncDir(dir)
}

// checkedMeta reads backup.json whole (Open bounds it) and checks it
// against the manifest.
func (a *Archive) checkedMeta(stream string) (io.Reader, error) {
	sm := a.manifest.Stream(stream)
	rc, err := a.StreamMeta(stream)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxMetaSize+1))
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("read %s: %w", MetaEntry(stream), err)
	}
	sum := sha256.Sum256(b)
	if e := sm.Entries[1]; int64(len(b)) != e.Size || hex.EncodeToString(sum[:]) != e.SHA256 {
		return nil, &EntryError{Entry: e.Name, Kind: ErrChecksum, Detail: fmt.Sprintf("read %d bytes with SHA-256 %s; the manifest declares %d bytes with %s",
			len(b), hex.EncodeToString(sum[:]), e.Size, printable(e.SHA256))}
	}
	return bytes.NewReader(b), nil
}

// writeNew writes r into a new file (0600, never through a symbolic link),
// syncs and closes it.
func writeNew(path string, r io.Reader) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return n, nil
}

// syncDir syncs a directory, so the names in it are durable.
func syncDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
