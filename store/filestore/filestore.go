// Package filestore is the file:///path backend of package store: the
// object at key a/b/c is the file <dir>/a/b/c, so a keeper directory written
// before the store existed (points/<m>/<l>/f<form>-<fp>/point.json and
// bus.tar, aside/<id>/aside.json and bus.tar, store.json) reads as objects
// unchanged.
//
// Directories are 0700 and files 0600. A symlink is never followed: every
// element of a key is opened with O_NOFOLLOW relative to its directory. An
// object is written to a temporary file .<name>.tmp<random> in its
// directory (with O_DIRECT where the file system allows, by a writer of the
// store's own that holds no part in memory: see writer.go), fsynced, renamed
// over its name, and the directory fsynced. Dot files, and directories whose
// name ends in .partial, are never listed. The store does not record
// checksums: Stat, List and Open leave Info.Sum empty.
//
// It may import package store and x/sys, nothing else of this module.
package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nats-keeper/nats-keeper/store"
)

// Store is a directory of objects. It is safe for concurrent use.
type Store struct {
	dir    string // absolute
	closed atomic.Bool
	blocks blockPool // the writers' aligned buffers
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Copier     = (*Store)(nil)
	_ store.FreeSpacer = (*Store)(nil)
	_ store.DiskSharer = (*Store)(nil)
)

// Open opens the store in dir, making dir (0700) if it is missing. A dir
// that is a symlink is refused.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("the store directory %s has no absolute path (%w), so the store was not opened", dir, err)
	}
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("making the store directory: %w, so the store was not opened", err)
		}
		fi, err = os.Lstat(abs)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("the store directory: %w, so the store was not opened", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("the store directory %s is a symlink, which the store never follows, so the store was not opened", abs)
	case !fi.IsDir():
		return nil, fmt.Errorf("the store directory %s is not a directory, so the store was not opened", abs)
	}
	return &Store{dir: abs}, nil
}

// Dir is the store's directory, absolute.
func (s *Store) Dir() string { return s.dir }

// Describe says what the store is and what it guarantees.
func (s *Store) Describe() store.Description {
	return store.Description{
		URL:  "file://" + s.dir,
		Kind: "file",
		Publish: "Commit writes the object to a temporary file beside its name, fsyncs it, renames it over the name and fsyncs " +
			"the directory, so a reader sees the old file or the new one whole, and a crash leaves at most a temporary file that Sweep removes.",
		Ranges: "ReadAt and Reader read the file at the offsets asked for (pread); nothing else of it is read.",
		Listing: "List reads the directories under the prefix when it runs: an object whose Commit (a rename) or Delete (an unlink) " +
			"returned before List began is listed or not accordingly. Dot files (temporary files among them) and .partial directories are not listed.",
	}
}

// Close marks the store closed; later calls fail. Writers already created
// finish. It is safe twice.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// FreeSpace is what statfs says an unprivileged writer may still take.
func (s *Store) FreeSpace(ctx context.Context) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return 0, fmt.Errorf("statfs of the store directory %s: %w, so its free space is unknown", s.dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// SharesDisk reports whether path is on the file system of the store's
// directory (the same device), without following a symlink at path.
func (s *Store) SharesDisk(path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Stat(s.dir, &a); err != nil {
		return false, fmt.Errorf("stat of the store directory %s: %w", s.dir, err)
	}
	if err := unix.Lstat(path, &b); err != nil {
		return false, fmt.Errorf("stat of %s: %w", path, err)
	}
	return a.Dev == b.Dev, nil
}

// checkKey is store.CheckKey and what a file system adds: no element over
// 255 bytes, none that begins with a dot (the store's temporary files do) or
// ends in .partial (never listed); and it refuses every key once the store
// was closed.
func (s *Store) checkKey(key string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	for _, e := range strings.Split(key, "/") {
		why := ""
		switch {
		case len(e) > 255:
			why = fmt.Sprintf("has an element of %d bytes; a file name takes at most 255", len(e))
		case strings.HasPrefix(e, "."):
			why = "has an element that begins with a dot, which the file store keeps for its temporary files"
		case strings.HasSuffix(e, ".partial"):
			why = "has an element that ends in .partial, which the file store never lists"
		}
		if why != "" {
			return fmt.Errorf("%w: %.200q %s", store.ErrBadKey, key, why)
		}
	}
	if s.closed.Load() {
		return fmt.Errorf("the store at %s was closed, so %s was not touched", s.dir, key)
	}
	return nil
}

func (s *Store) notFound(key string) error {
	return fmt.Errorf("%w: %s in %s", store.ErrNotFound, key, s.dir)
}

// errSymlink is wrapped by every refusal to pass through a symlink.
var errSymlink error = symlinkError{}

// symlinkError is a refusal to pass through a symlink: the key cannot be
// used in this store, so it counts as a bad key (errors.Is ErrBadKey).
type symlinkError struct{}

func (symlinkError) Error() string   { return "is a symlink, which the store never follows" }
func (symlinkError) Is(t error) bool { return t == store.ErrBadKey }

// openRoot opens the store's directory, not through a symlink.
func (s *Store) openRoot() (int, error) {
	fd, err := unix.Open(s.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening the store directory %s: %w", s.dir, err)
	}
	return fd, nil
}

// openDirAt opens the directory name in dir without following a symlink.
// Its error wraps errSymlink for a symlink, unix.ENOTDIR for something else
// that is not a directory, unix.ENOENT for nothing.
func openDirAt(dir int, name, path string) (int, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		return fd, nil
	}
	var st unix.Stat_t
	if !errors.Is(err, unix.ENOENT) && unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return -1, fmt.Errorf("%s %w", path, errSymlink)
		case unix.S_IFDIR:
		default:
			err = unix.ENOTDIR
		}
	}
	return -1, fmt.Errorf("%s: %w", path, err)
}

// parent opens the directory that holds key's last element, walking the
// elements before it from the store's directory; with mk it makes those
// that are missing (0700) and fsyncs the directory each was made in. It
// returns the directory and the last element. A missing or non-directory
// element is an error wrapping store.ErrNotFound unless mk.
func (s *Store) parent(key string, mk bool) (int, string, error) {
	if err := s.checkKey(key); err != nil {
		return -1, "", err
	}
	fd, err := s.openRoot()
	if err != nil {
		return -1, "", err
	}
	elems := strings.Split(key, "/")
	path := s.dir
	for _, e := range elems[:len(elems)-1] {
		path = filepath.Join(path, e)
		next, err := openDirAt(fd, e, path)
		if mk && errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(fd, e, 0o700); err == nil {
				err = unix.Fsync(fd)
			}
			if err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openDirAt(fd, e, path)
			} else {
				err = fmt.Errorf("making directory %s: %w", path, err)
			}
		}
		unix.Close(fd)
		if err != nil {
			if !mk && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)) {
				return -1, "", s.notFound(key)
			}
			return -1, "", err
		}
		fd = next
	}
	return fd, elems[len(elems)-1], nil
}

// statAt describes name in dir without following a symlink.
func statAt(dir int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// info describes the regular file key from its stat.
func info(key string, st *unix.Stat_t) store.Info {
	sec, nsec := st.Mtim.Unix()
	return store.Info{Key: key, Size: st.Size, Modified: time.Unix(sec, nsec)}
}
