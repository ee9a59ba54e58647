package keeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// File layout under the keeper's directory (design.md, Files).
const (
	pointsDir     = "points"
	asideDir      = "aside"
	archiveName   = "bus.tar"
	pointFile     = "point.json"
	asideFile     = "aside.json"
	partialSuffix = ".partial"
	maxRecordSize = 4 << 20 // point.json / aside.json
)

func pointRel(module, local string, form int, fingerprint string) string {
	return filepath.Join(pointsDir, module, local, "f"+strconv.Itoa(form)+"-"+fingerprint)
}

func asideRel(id string) string { return filepath.Join(asideDir, id) }

// abs joins a relative layout path to the keeper's directory.
func (k *Keeper) abs(rel string) string { return filepath.Join(k.dir, rel) }

// mkdirs makes every directory of rel below the keeper's directory, 0700,
// refusing to pass through a symlink.
func (k *Keeper) mkdirs(rel string) error {
	cur := k.dir
	for _, part := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := syncDir(filepath.Dir(cur)); err != nil {
				return err
			}
		case err != nil:
			return err
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory (a symlink is never followed)", cur)
		}
	}
	return nil
}

// checkNoLinks refuses rel if any component below the keeper's directory is
// a symlink or missing.
func (k *Keeper) checkNoLinks(rel string) error {
	cur := k.dir
	for _, part := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink, which the keeper never follows", cur)
		}
	}
	return nil
}

// syncDir fsyncs a directory so that renames and creations in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}

// writeFileDurable writes data to path through a temporary file: write,
// fsync, close, rename, fsync the directory. The file is 0600.
func writeFileDurable(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func writeJSONDurable(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileDurable(path, append(data, '\n'))
}

// openNoFollow opens a regular file for reading without following a symlink.
func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

// readJSON reads a small JSON record (point.json, aside.json) strictly.
func readJSON(path string, v any) error {
	f, err := openNoFollow(path)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return err
	}
	if len(data) > maxRecordSize {
		return fmt.Errorf("%s is over %d bytes", path, maxRecordSize)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", path, err)
	}
	return nil
}

// createExclusive creates a new 0600 file, never through a symlink.
func createExclusive(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
}
