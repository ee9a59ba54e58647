package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nats-keeper/nats-keeper/store"
)

// lookup describes the regular file name in dir, the object key. Nothing,
// a directory or another kind of file there is ErrNotFound; a symlink is
// refused.
func (s *Store) lookup(dir int, name, key string) (unix.Stat_t, error) {
	st, err := statAt(dir, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return st, s.notFound(key)
	case err != nil:
		return st, fmt.Errorf("stat of %s: %w", filepath.Join(s.dir, key), err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return st, fmt.Errorf("%s %w", filepath.Join(s.dir, key), errSymlink)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return st, s.notFound(key)
	}
	return st, nil
}

// Stat describes the object at key: its size and modification time (no
// Sum: the file store does not record one).
func (s *Store) Stat(ctx context.Context, key string) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		return store.Info{}, readFail("describing", key, err)
	}
	dir, base, err := s.parent(key, false)
	if err != nil {
		return store.Info{}, readFail("describing", key, err)
	}
	defer unix.Close(dir)
	st, err := s.lookup(dir, base, key)
	if err != nil {
		return store.Info{}, readFail("describing", key, err)
	}
	return info(key, &st), nil
}

// readFail says that nothing was read of key, unless err says by itself
// that there is nothing to read (ErrNotFound, ErrBadKey).
func readFail(doing, key string, err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrBadKey) {
		return err
	}
	return fmt.Errorf("%s %s: %w, so nothing was read", doing, key, err)
}

// Open opens the object at key, never through a symlink.
func (s *Store) Open(ctx context.Context, key string) (store.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, readFail("opening", key, err)
	}
	dir, base, err := s.parent(key, false)
	if err != nil {
		return nil, readFail("opening", key, err)
	}
	defer unix.Close(dir)
	if _, err := s.lookup(dir, base, key); err != nil {
		return nil, readFail("opening", key, err)
	}
	fd, err := unix.Openat(dir, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, s.notFound(key)
	}
	if err != nil {
		return nil, readFail("opening", key, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, readFail("opening", key, fmt.Errorf("it changed into something other than a regular file while it was opened"))
	}
	unix.SetNonblock(fd, false)
	return &object{f: os.NewFile(uintptr(fd), filepath.Join(s.dir, key)), info: info(key, &st)}, nil
}

// object is an open file. Its SyscallConn lets a reader that type-asserts
// the io.ReaderAt (the archive reader's readahead and O_DIRECT hints) reach
// the descriptor.
type object struct {
	f    *os.File
	info store.Info
}

func (o *object) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }
func (o *object) Size() int64                             { return o.info.Size }
func (o *object) Info() store.Info                        { return o.info }
func (o *object) Close() error                            { return o.f.Close() }

// SyscallConn is the file's.
func (o *object) SyscallConn() (syscall.RawConn, error) { return o.f.SyscallConn() }

// Reader reads the n bytes at off front to back with sequential preads.
func (o *object) Reader(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off+n > o.info.Size {
		return nil, fmt.Errorf("reading %d bytes at %d of %s: the range lies outside its %d bytes, so nothing was read", n, off, o.info.Key, o.info.Size)
	}
	return &reader{ctx: ctx, f: o.f, off: off, end: off + n}, nil
}

type reader struct {
	ctx      context.Context
	f        *os.File
	off, end int64
}

func (r *reader) Read(p []byte) (int, error) {
	if r.off >= r.end {
		return 0, io.EOF
	}
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	if rest := r.end - r.off; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := r.f.ReadAt(p, r.off)
	r.off += int64(n)
	if err == io.EOF {
		err = nil
		if n < len(p) {
			err = fmt.Errorf("%s ended at %d, before the %d bytes it had when it was opened: %w", r.f.Name(), r.off, r.end, io.ErrUnexpectedEOF)
		}
	}
	return n, err
}

func (r *reader) Close() error { return nil }
