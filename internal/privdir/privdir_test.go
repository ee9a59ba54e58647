//go:build unix

package privdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Open makes what is missing of the path 0700, and checks each directory it
// made: one that is not private (made by someone else meanwhile, or
// widened) is refused.
func TestOpenMakesTheMissingPathPrivate(t *testing.T) {
	tmp := t.TempDir()
	d, err := Open("--dir", filepath.Join(tmp, "a", "b", "c"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "a/b", "a/b/c"} {
		fi, err := os.Stat(filepath.Join(tmp, p))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v", p, err, fi.Mode())
		}
	}
	if d.Path() != filepath.Join(tmp, "a", "b", "c") {
		t.Errorf("path %s", d.Path())
	}
	if err := d.Check(); err != nil {
		t.Errorf("check at once: %v", err)
	}
}

func TestOpenRefuses(t *testing.T) {
	tmp := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(tmp, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	real := mk("real", 0o700)
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(tmp, "dangling")
	if err := os.Symlink(filepath.Join(tmp, "gone"), dangling); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, what string }{
		{link, "is a symbolic link (to " + real + ")"},
		{dangling, "leads nowhere"},
		{mk("group", 0o750), "open to group or other (mode 0750)"},
		{mk("other", 0o701), "open to group or other (mode 0701)"},
		{file, "is not a directory"},
	} {
		_, err := Open("--dir", c.dir)
		var rf *Refusal
		if !errors.As(err, &rf) || !errors.Is(err, ErrNotPrivate) || !strings.Contains(rf.What, c.what) || rf.Fix == "" {
			t.Errorf("%s: %v, want a refusal saying %q", c.dir, err, c.what)
		}
	}
}

// A directory owned by another user is refused (root only: chown).
func TestOpenRefusesAnotherUsersDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	p := filepath.Join(t.TempDir(), "foreign")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := Open("--dir", p)
	var rf *Refusal
	if !errors.As(err, &rf) || !strings.Contains(rf.What, "not by root") || !strings.Contains(rf.Fix, "chown root "+p) {
		t.Fatalf("another user's dir: %v", err)
	}
}

// Check refuses the directory once it was replaced (another inode at the
// path), widened, or swapped for a symlink.
func TestCheckSeesAReplacedDir(t *testing.T) {
	tmp := t.TempDir()
	p := filepath.Join(tmp, "keeper")
	d, err := Open("--dir", p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, p+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err == nil || !strings.Contains(err.Error(), "moved or replaced") {
		t.Errorf("a replaced dir: %v", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p+".old", p); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a dir swapped for a symlink: %v", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".old", p); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err != nil {
		t.Errorf("the same dir back: %v", err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("a widened dir: %v", err)
	}
}
