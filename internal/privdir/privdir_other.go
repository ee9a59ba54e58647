//go:build !unix

package privdir

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir is a directory that Open found usable. Off Unix, owners and modes are
// not checked: only that it is a directory, not a symlink, and still the
// same one.
type Dir struct {
	path string
	fi   fs.FileInfo
}

// Open resolves dir once, making it 0700 if it is missing.
func Open(flag, dir string) (*Dir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%s %q has no absolute path: %w", flag, dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("%s %s could not be made: %w", flag, abs, err)
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
		return nil, &Refusal{What: fmt.Sprintf("%s %s is a symbolic link or not a directory", flag, abs), Fix: "pass the directory itself"}
	}
	return &Dir{path: abs, fi: fi}, nil
}

// Check says whether the directory is still the one Open found.
func (d *Dir) Check() error {
	fi, err := os.Lstat(d.path)
	if err != nil || !os.SameFile(fi, d.fi) {
		return &Refusal{What: fmt.Sprintf("the keeper's directory %s is no longer the directory the keeper started with", d.path),
			Fix: "check what happened to it, then start the keeper again"}
	}
	return nil
}
