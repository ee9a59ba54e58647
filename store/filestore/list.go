package filestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nats-keeper/nats-keeper/store"
)

// List describes the regular files whose key begins with prefix, sorted by
// key. Dot files, .partial directories, symlinks and files whose names make
// no key are left out.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Info, error) {
	var out []store.Info
	err := s.walk(ctx, prefix, func(key string, dir int, name string, st *unix.Stat_t) error {
		if !strings.HasPrefix(name, ".") && s.checkKey(key) == nil {
			out = append(out, info(key, st))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w, so nothing was listed", prefix, err)
	}
	slices.SortFunc(out, func(a, b store.Info) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// walk calls visit for every file that is not a directory below the
// directory named by prefix up to its last slash, whose name there begins
// with the rest of prefix. It does not enter dot directories, .partial
// directories or symlinks. A prefix that names no directory has no files.
func (s *Store) walk(ctx context.Context, prefix string, visit func(key string, dir int, name string, st *unix.Stat_t) error) error {
	if s.closed.Load() {
		return fmt.Errorf("the store at %s was closed", s.dir)
	}
	dirKey, first := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dirKey, first = prefix[:i], prefix[i+1:]
	}
	fd, err := s.openRoot()
	if err != nil {
		return err
	}
	if dirKey != "" {
		for _, e := range strings.Split(dirKey, "/") {
			if !enterable(e) {
				unix.Close(fd)
				return nil
			}
			next, err := openDirAt(fd, e, e)
			unix.Close(fd)
			if err != nil {
				return nil // no directory, so no keys under it
			}
			fd = next
		}
	}
	return s.walkDir(ctx, fd, dirKey, first, visit)
}

func enterable(name string) bool {
	return name != "" && name != ".." && !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".partial")
}

// walkDir walks the directory fd (and closes it), whose key is dirKey.
func (s *Store) walkDir(ctx context.Context, fd int, dirKey, first string, visit func(string, int, string, *unix.Stat_t) error) error {
	d := os.NewFile(uintptr(fd), filepath.Join(s.dir, dirKey))
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("reading the directory %s: %w", d.Name(), err)
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !strings.HasPrefix(name, first) {
			continue
		}
		st, err := statAt(fd, name)
		if errors.Is(err, unix.ENOENT) {
			continue // removed since the directory was read
		}
		if err != nil {
			return fmt.Errorf("stat of %s: %w", filepath.Join(d.Name(), name), err)
		}
		key := path.Join(dirKey, name)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
		case unix.S_IFDIR:
			if !enterable(name) {
				continue
			}
			sub, err := openDirAt(fd, name, key)
			if err != nil {
				continue // removed, or replaced by something else
			}
			if err := s.walkDir(ctx, sub, key, "", visit); err != nil {
				return err
			}
		default:
			if err := visit(key, fd, name, &st); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes the object at key, and its directories if that leaves
// them empty. A key that holds no object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	fail := func(err error) error { return fmt.Errorf("deleting %s: %w, so nothing was deleted", key, err) }
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	dir, base, err := s.parent(key, false)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fail(err)
	}
	defer func() {
		if dir >= 0 {
			unix.Close(dir)
		}
	}()
	if _, err := s.lookup(dir, base, key); errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return fail(err)
	}
	if err := unix.Unlinkat(dir, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fail(err)
	}
	err = unix.Fsync(dir)
	unix.Close(dir)
	dir = -1
	if err != nil {
		return fmt.Errorf("%s was deleted, but its directory could not be synced (%w), so it may come back after a crash", key, err)
	}
	s.removeEmptyParents(key)
	return nil
}

// removeEmptyParents removes the directories of key's elements, deepest
// first, while they are empty; never the store's directory.
func (s *Store) removeEmptyParents(key string) {
	elems := strings.Split(key, "/")
	for i := len(elems) - 1; i >= 1; i-- {
		dir, name, err := s.parent(strings.Join(elems[:i], "/"), false)
		if err != nil {
			return
		}
		err = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		unix.Close(dir)
		if err != nil {
			return
		}
	}
}

// Sweep removes temporary files (.<name>.tmp…) last changed longer than age
// ago, the leftovers of writes that never committed, and the directories
// that leaves empty. It leaves .partial directories alone.
func (s *Store) Sweep(ctx context.Context, age time.Duration) error {
	before := time.Now().Add(-age)
	var swept []string
	err := s.walk(ctx, "", func(key string, dir int, name string, st *unix.Stat_t) error {
		sec, nsec := st.Mtim.Unix()
		if !isTemp(name) || st.Mode&unix.S_IFMT != unix.S_IFREG || !time.Unix(sec, nsec).Before(before) {
			return nil
		}
		if err := unix.Unlinkat(dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("removing %s: %w", filepath.Join(s.dir, key), err)
		}
		swept = append(swept, key)
		return nil
	})
	for _, key := range swept {
		s.removeEmptyParents(key)
	}
	if err != nil {
		return fmt.Errorf("sweeping %s: %w, so some leftovers remain", s.dir, err)
	}
	return nil
}

// isTemp: the store's temporary files (.<name>.tmp<random>), and the
// keeper's before it (.<name>.tmp<digits>).
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name[1:], ".tmp")
}
