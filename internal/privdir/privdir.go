//go:build unix

// Package privdir makes sure the keeper's directory is its own: not a
// symlink, owned by the keeper's user, closed to group and other. Open
// resolves the directory once (making the missing part of its path 0700, and
// checking each directory it made too); Check, before each verb that
// writes, says whether the directory is still the one Open found (same
// device and inode, same owner, still private).
//
// It imports only the standard library.
package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Dir is a directory that Open found private.
type Dir struct {
	path     string
	dev, ino uint64
	uid      int
}

// Open resolves dir once: its parent's symlinks are resolved, the directory
// itself must not be one. What is missing of the path is made, each
// directory 0700. The directory, and every directory Open made, must be
// owned by this process's effective user and closed to group and other;
// otherwise the error (wrapping ErrNotPrivate) is a sentence that names the
// fix. flag names the directory in sentences ("--dir").
func Open(flag, dir string) (*Dir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%s %q has no absolute path: %w", flag, dir, err)
	}
	made, err := makeMissing(abs)
	if err != nil {
		return nil, fmt.Errorf("%s %s could not be made: %w", flag, abs, err)
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return nil, fmt.Errorf("%s %s: its parent directory cannot be resolved: %w", flag, abs, err)
	}
	real := filepath.Join(parent, filepath.Base(abs))
	uid := os.Geteuid()
	for _, m := range made[:max(0, len(made)-1)] {
		if _, err := check(flag, m, uid, "which the keeper made"); err != nil {
			return nil, err
		}
	}
	st, err := check(flag, real, uid, "")
	if err != nil {
		return nil, err
	}
	return &Dir{path: real, dev: uint64(st.Dev), ino: uint64(st.Ino), uid: uid}, nil
}

// Check says whether the directory is still the one Open found: the same
// device and inode at its path, not a symlink, its owner and mode still
// private. Its error wraps ErrNotPrivate.
func (d *Dir) Check() error {
	st, err := check("the keeper's directory", d.path, d.uid, "")
	if err != nil {
		return err
	}
	if uint64(st.Dev) != d.dev || uint64(st.Ino) != d.ino {
		return &Refusal{What: fmt.Sprintf("the keeper's directory %s is no longer the directory the keeper started with "+
			"(device %d inode %d then, device %d inode %d now): it was moved or replaced", d.path, d.dev, d.ino, uint64(st.Dev), uint64(st.Ino)),
			Fix: "check what happened to it, then start the keeper again"}
	}
	return nil
}

// makeMissing makes each missing directory of abs, 0700, and returns the
// ones it made, outermost first.
func makeMissing(abs string) ([]string, error) {
	var missing []string
	for p := abs; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return made, err
		}
		made = append(made, missing[i])
	}
	return made, nil
}

// check refuses a path that is a symlink, not a directory, not uid's, or
// open to group or other; what says why the path matters ("which the keeper
// made"), or "".
func check(flag, path string, uid int, what string) (*syscall.Stat_t, error) {
	name := flag + " " + path
	if what != "" {
		name = "the directory " + path + ", " + what + " on the path of " + flag + ","
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %w", name, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return nil, &Refusal{What: fmt.Sprintf("%s is a symbolic link, which the keeper never follows, and it leads nowhere (%v)", name, err),
				Fix: fmt.Sprintf("pass a real directory as %s", flag)}
		}
		return nil, &Refusal{What: fmt.Sprintf("%s is a symbolic link (to %s), which the keeper never follows", name, target),
			Fix: fmt.Sprintf("pass the directory itself: %s %s", flag, target)}
	}
	if !fi.IsDir() {
		return nil, &Refusal{What: fmt.Sprintf("%s is not a directory", name),
			Fix: "pass a directory, or a path that does not exist yet (the keeper makes it 0700)"}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, &Refusal{What: fmt.Sprintf("%s: its owner cannot be read on this system", name), Fix: "pass another directory"}
	}
	if int(st.Uid) != uid {
		return nil, &Refusal{What: fmt.Sprintf("%s is owned by %s, not by %s, the user the keeper runs as", name, userName(int(st.Uid)), userName(uid)),
			Fix: fmt.Sprintf("run `chown %s %s`, or run the keeper as %s", userName(uid), path, userName(int(st.Uid)))}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, &Refusal{What: fmt.Sprintf("%s is open to group or other (mode %04o)", name, perm),
			Fix: fmt.Sprintf("run `chmod 700 %s`", path)}
	}
	return st, nil
}

// userName is uid's name, or the number when it has none.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}
