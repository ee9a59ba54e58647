//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

)

// serve refuses a --dir that is a symlink, open to group or other, or owned
// by another user: exit 2 and a sentence that names the fix, before any
// server is started or anything is made in it.
func TestServeRefusesADirThatIsNotPrivate(t *testing.T) {
	tmp := t.TempDir()
	real := filepath.Join(tmp, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(tmp, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil { // not through Mkdir: the umask would narrow it
		t.Fatal(err)
	}
	cases := []struct{ name, dir, fix string }{
		{"symlink", link, "pass the directory itself: --dir " + real},
		{"0755", open, "run `chmod 700 " + open + "`"},
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(tmp, "foreign")
		if err := os.Mkdir(foreign, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(foreign, 65534, 65534); err != nil { // nobody
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, dir, fix string }{"another user's", foreign, "run `chown root " + foreign + "`"})
	} else {
		t.Log("not root: the case of a --dir owned by another user needs root to chown, and is left out")
	}
	for _, c := range cases {
		code, _, stderr := runArgs(t, "serve", "--embedded", "--listen", "127.0.0.1:0", "--dir", c.dir)
		if code != exitUsage {
			t.Errorf("%s --dir: exit %d, want %d; stderr %s", c.name, code, exitUsage, stderr)
		}
		if !strings.Contains(stderr, "so nothing is served: "+c.fix) {
			t.Errorf("%s --dir: stderr lacks the fix %q: %s", c.name, c.fix, stderr)
		}
		if _, err := os.Stat(filepath.Join(c.dir, "nats")); err == nil {
			t.Errorf("%s --dir: the embedded server's store was made in it", c.name)
		}
	}
}
