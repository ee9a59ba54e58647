package filestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/nats-keeper/nats-keeper/store"
)

// attempts bounds how often a write makes its directory again after a
// concurrent Delete or Abort removed it as empty.
const attempts = 5

// Create begins the object at key: a temporary file in its directory that
// the file store's own writer (writer.go) fills.
func (s *Store) Create(ctx context.Context, key string) (store.Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("creating %s: %w, so nothing was written", key, err)
	}
	var err error
	for range attempts {
		var k *fileSink
		if k, err = s.newSink(key); err == nil {
			return newWriter(ctx, key, k), nil
		}
		if !errors.Is(err, unix.ENOENT) {
			break
		}
	}
	return nil, fmt.Errorf("creating %s: %w, so nothing was written", key, err)
}

func (s *Store) newSink(key string) (*fileSink, error) {
	dir, base, err := s.parent(key, true)
	if err != nil {
		return nil, err
	}
	tmp := tempName(base)
	fd, err := unix.Openat(dir, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		unix.Close(dir)
		return nil, fmt.Errorf("making the temporary file %s: %w", tmp, err)
	}
	k := &fileSink{key: key, dir: dir, base: base, tmp: tmp, direct: openDirect(dir, tmp, fd)}
	k.f = os.NewFile(uintptr(fd), filepath.Join(s.dir, filepath.Dir(key), tmp))
	k.s = s
	return k, nil
}

// tempName is the name of a temporary file for base: a dot file (never
// listed) that Sweep knows by its .tmp.
func tempName(base string) string {
	return fmt.Sprintf(".%s.tmp%016x", base[:min(len(base), 200)], rand.Uint64())
}

// fileSink is one object's temporary file. Its writer never calls it from
// two goroutines at once.
type fileSink struct {
	s               *Store
	key, base, tmp  string
	dir             int      // the object's directory; -1 once closed
	f               *os.File // the temporary file
	direct          *os.File // the same file opened with O_DIRECT, or nil
	renamed, closed bool
}

// writeAt writes p at off: its whole aligned blocks straight to the disk
// where the file system allows, the rest (the object's tail) through the
// page cache. A direct write the file system refuses (EINVAL) is made
// through the page cache, and so is every later one.
func (k *fileSink) writeAt(p []byte, off int64) error {
	if m := directLen(p, off); k.direct != nil && m > 0 {
		_, err := k.direct.WriteAt(p[:m], off)
		switch {
		case errors.Is(err, unix.EINVAL):
			k.direct.Close()
			k.direct = nil
		case err != nil:
			return writeFail(k.f.Name(), off, err)
		default:
			p, off = p[m:], off+int64(m)
		}
	}
	if len(p) == 0 {
		return nil
	}
	if _, err := k.f.WriteAt(p, off); err != nil {
		return writeFail(k.f.Name(), off, err)
	}
	return nil
}

// writeFail is the error of a write to name at off: store.ErrFull too when
// the file system has no room left (ENOSPC, or EDQUOT, a quota).
func writeFail(name string, off int64, err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("writing %s at %d: %w (%w)", name, off, err, store.ErrFull)
	}
	return fmt.Errorf("writing %s at %d: %w", name, off, err)
}

// Complete fsyncs the temporary file, which must hold size bytes, renames it
// over the object's name and fsyncs the directory.
func (k *fileSink) Complete(ctx context.Context, size int64) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		return store.Info{}, err
	}
	fi, err := k.f.Stat()
	if err != nil {
		return store.Info{}, err
	}
	if fi.Size() != size {
		return store.Info{}, fmt.Errorf("the temporary file %s holds %d bytes, not the %d written", k.f.Name(), fi.Size(), size)
	}
	if err := k.f.Sync(); err != nil {
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
			return store.Info{}, fmt.Errorf("syncing %s: %w (%w)", k.f.Name(), err, store.ErrFull)
		}
		return store.Info{}, fmt.Errorf("syncing %s: %w", k.f.Name(), err)
	}
	if err := k.closeFiles(); err != nil {
		return store.Info{}, fmt.Errorf("closing %s: %w", k.f.Name(), err)
	}
	if err := unix.Renameat(k.dir, k.tmp, k.dir, k.base); err != nil {
		return store.Info{}, fmt.Errorf("renaming %s into place: %w", k.f.Name(), err)
	}
	k.renamed = true
	err = unix.Fsync(k.dir)
	unix.Close(k.dir)
	k.dir = -1
	if err != nil {
		return store.Info{}, fmt.Errorf("%s was renamed into place, but its directory could not be synced (%w), so it may not survive a crash", k.key, err)
	}
	return store.Info{Key: k.key, Size: size, Modified: fi.ModTime()}, nil
}

// Abort removes the temporary file, and the directories made for it if
// they are left empty.
func (k *fileSink) Abort(ctx context.Context) {
	k.closeFiles()
	if k.dir < 0 {
		return
	}
	if !k.renamed {
		unix.Unlinkat(k.dir, k.tmp, 0)
	}
	unix.Close(k.dir)
	k.dir = -1
	k.s.removeEmptyParents(k.key)
}

func (k *fileSink) closeFiles() error {
	if k.closed {
		return nil
	}
	k.closed = true
	if k.direct != nil {
		k.direct.Close()
	}
	return k.f.Close()
}

// Copy makes dst a hard link to src's file, through a temporary name
// renamed into place: atomic, and no byte is copied. Where the two lie on
// different file systems (a mount inside the store) it copies the bytes.
func (s *Store) Copy(ctx context.Context, src, dst string) (store.Info, error) {
	fail := func(err error) (store.Info, error) {
		return store.Info{}, fmt.Errorf("copying %s to %s: %w, so nothing was copied", src, dst, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if err := s.checkKey(dst); err != nil {
		return fail(err)
	}
	sdir, sbase, err := s.parent(src, false)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(sdir)
	for range attempts {
		if _, err := s.lookup(sdir, sbase, src); err != nil {
			return fail(err)
		}
		info, err := s.link(sdir, sbase, dst)
		if errors.Is(err, unix.EXDEV) {
			return store.CopyObject(ctx, s, src, s, dst)
		}
		if !errors.Is(err, unix.ENOENT) {
			if err != nil {
				return fail(err)
			}
			return info, nil
		}
	}
	return fail(fmt.Errorf("its source or its directory kept vanishing"))
}

// link links the file name in sdir to dst.
func (s *Store) link(sdir int, name, dst string) (store.Info, error) {
	dir, base, err := s.parent(dst, true)
	if err != nil {
		return store.Info{}, err
	}
	defer unix.Close(dir)
	tmp := tempName(base)
	if err := unix.Linkat(sdir, name, dir, tmp, 0); err != nil {
		return store.Info{}, fmt.Errorf("linking %s: %w", tmp, err)
	}
	st, err := statAt(dir, tmp)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("the source became something other than a regular file")
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, base)
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return store.Info{}, err
	}
	if err := unix.Fsync(dir); err != nil {
		return store.Info{}, fmt.Errorf("%s was linked into place, but its directory could not be synced (%w), so it may not survive a crash", dst, err)
	}
	return info(dst, &st), nil
}
