package filestore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/filestore"
	"github.com/nats-keeper/nats-keeper/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return mustOpen(t, t.TempDir()) })
}

func mustOpen(t *testing.T, dir string) *filestore.Store {
	t.Helper()
	s, err := filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s store.Store, key string, data []byte) {
	t.Helper()
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A symlink is never followed: not as a directory of the key, not as the
// object itself, not as the store's directory; nothing is read or written
// through it, and List does not show what lies behind it.
func TestSymlinksAreRefused(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), []byte("not for the store"))
	dir := t.TempDir()
	s := mustOpen(t, dir)
	put(t, s, "points/m/real", []byte("real"))
	if err := os.Symlink(outside, filepath.Join(dir, "points", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "points", "m", "file")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("%s: %v; want a refusal that names the symlink", what, err)
		}
	}
	for _, key := range []string{"points/link/secret", "points/m/file"} {
		_, err := s.Open(ctx, key)
		refused("Open("+key+")", err)
		_, err = s.Stat(ctx, key)
		refused("Stat("+key+")", err)
		refused("Delete("+key+")", s.Delete(ctx, key))
		_, err = s.Copy(ctx, key, "copied")
		refused("Copy from "+key, err)
	}
	_, err := s.Create(ctx, "points/link/new")
	refused("Create(points/link/new)", err)
	_, err = s.Copy(ctx, "points/m/real", "points/link/copied")
	refused("Copy to points/link/copied", err)
	// The object itself a symlink: Create writes a new file over the name,
	// never into the symlink's target.
	put(t, s, "points/m/file", []byte("mine"))
	if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "not for the store" {
		t.Errorf("the symlink's target was changed to %q", got)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("something was written behind the symlink: %v", entries)
	}
	infos, err := s.List(ctx, "")
	if keys := keysOf(infos); err != nil || !slices.Equal(keys, []string{"points/m/file", "points/m/real"}) {
		t.Errorf("List: %q, %v", keys, err)
	}
	link := filepath.Join(t.TempDir(), "store")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := filestore.Open(link); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Open of a store directory that is a symlink: %v", err)
	}
}

func keysOf(infos []store.Info) []string {
	var keys []string
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}

// Directories are made 0700 and objects 0600, the store's own directory
// included.
func TestModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "store")
	s := mustOpen(t, dir)
	put(t, s, "points/m/l/f1-x/bus.tar", []byte("x"))
	check := func(path string, want os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s is %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	check(dir, 0o700)
	for _, d := range []string{"points", "points/m", "points/m/l", "points/m/l/f1-x"} {
		check(filepath.Join(dir, d), 0o700)
	}
	check(filepath.Join(dir, "points/m/l/f1-x/bus.tar"), 0o600)
	if _, err := filestore.Open(filepath.Join(dir, "points/m/l/f1-x/bus.tar")); err == nil {
		t.Error("a store was opened on a file")
	}
}

// A keeper directory as the keeper wrote it before the store (points and
// asides as directories of point.json or aside.json and bus.tar, store.json,
// .partial directories and temporary dot files beside them) reads as its
// objects, unchanged; the .partial directories and dot files are not listed.
func TestOldLayoutReads(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"store.json": []byte(`{"id":"abc"}` + "\n"),
		"points/billing/orders/f1-abc/point.json":     []byte("{}\n"),
		"points/billing/orders/f1-abc/bus.tar":        bytes.Repeat([]byte("tar!"), 3<<20),
		"points/billing/orders/f2-def/point.json":     []byte("{\"form\":2}\n"),
		"points/billing/orders/f2-def/bus.tar":        bytes.Repeat([]byte("rat!"), 1000),
		"aside/billing.orders.1/aside.json":           []byte("{}\n"),
		"aside/billing.orders.1/bus.tar":              []byte("aside"),
		"points/billing/orders/f3-ghi.partial/x":      []byte("half made"),
		"aside/billing.orders.2.partial/bus.tar":      []byte("half made"),
		"points/billing/orders/f1-abc/.bus.tar.tmp42": []byte("temporary"),
		".store.json.0123abcd":                        []byte("{}"),
	}
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data)
	}
	s := mustOpen(t, dir)
	infos, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for name := range files {
		if !strings.Contains(name, ".partial/") && !strings.Contains(name, "/.") && !strings.HasPrefix(name, ".") {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	if got := keysOf(infos); !slices.Equal(got, want) {
		t.Fatalf("List gave %q, want %q", got, want)
	}
	for _, info := range infos {
		o, err := s.Open(t.Context(), info.Key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
		o.Close()
		if err != nil || !bytes.Equal(got, files[info.Key]) || info.Size != int64(len(got)) || info.Modified.IsZero() {
			t.Errorf("%s reads as %d bytes (%v), its Info %+v", info.Key, len(got), err, info)
		}
	}
}

// Keys a file system cannot hold as the store lays them out are refused
// with ErrBadKey: dot elements (the store's temporary files), .partial
// elements (never listed), elements over 255 bytes.
func TestFileKeysRefused(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	for _, key := range []string{".x", "a/.b", "points/f1.partial/bus.tar", "a/" + strings.Repeat("n", 256)} {
		if _, err := s.Create(t.Context(), key); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Create(%.40q): %v; want ErrBadKey", key, err)
		}
		if _, err := s.Stat(t.Context(), key); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Stat(%.40q): %v; want ErrBadKey", key, err)
		}
	}
}

// Delete removes the directories it leaves empty, never the store's own or
// one still holding something.
func TestDeleteRemovesEmptyDirectories(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	put(t, s, "points/m/l/f1-x/bus.tar", []byte("x"))
	put(t, s, "points/m/l/f1-x/point.json", []byte("{}"))
	put(t, s, "points/m/k/f1-y/point.json", []byte("{}"))
	for _, k := range []string{"points/m/l/f1-x/bus.tar", "points/m/l/f1-x/point.json"} {
		if err := s.Delete(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "points/m/l")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("points/m/l is left: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "points/m/k/f1-y/point.json")); err != nil {
		t.Errorf("the other point went: %v", err)
	}
	if err := s.Delete(t.Context(), "points/m/k/f1-y/point.json"); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the store directory holds %v (%v), or is gone", entries, err)
	}
}

// Copy is a hard link: the copy is the same file.
func TestCopyLinks(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	put(t, s, "points/a/bus.tar", bytes.Repeat([]byte("a"), 10000))
	if _, err := s.Copy(t.Context(), "points/a/bus.tar", "aside/b/bus.tar"); err != nil {
		t.Fatal(err)
	}
	a, err := os.Stat(filepath.Join(dir, "points/a/bus.tar"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(filepath.Join(dir, "aside/b/bus.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(a, b) {
		t.Error("the copy is not a link to the same file")
	}
}

// Sweep removes temporary files older than its age (a crashed write's, the
// old keeper's), and no newer ones.
func TestSweepRemovesOldTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	w, err := s.Create(t.Context(), "points/m/l/f1-x/bus.tar")
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 3*store.PartSize/2)) // and never committed: a crash
	old := filepath.Join(dir, "points/m/.point.json.tmp123")
	writeFile(t, old, []byte("{}"))
	hourAgo := time.Now().Add(-time.Hour)
	os.Chtimes(old, hourAgo, hourAgo)
	temps := func() []string {
		got, _ := filepath.Glob(filepath.Join(dir, "points/m/*/*/.*"))
		more, _ := filepath.Glob(filepath.Join(dir, "points/m/.*"))
		return append(got, more...)
	}
	if n := len(temps()); n != 2 {
		t.Fatalf("%d temporary files before Sweep: %q", n, temps())
	}
	if err := s.Sweep(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := temps(); len(got) != 1 || !strings.Contains(got[0], ".bus.tar.tmp") {
		t.Errorf("after Sweep(1m): %q; want only the crashed write's", got)
	}
	if err := s.Sweep(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if got := temps(); len(got) != 0 {
		t.Errorf("after Sweep(0): %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Sweep left the emptied directories: %v", entries)
	}
}

// The object offers its descriptor, for the archive reader's readahead and
// O_DIRECT hints.
func TestObjectOffersItsDescriptor(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	put(t, s, "k", []byte("x"))
	o, err := s.Open(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	sc, ok := o.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		t.Fatal("the object has no SyscallConn")
	}
	if _, err := sc.SyscallConn(); err != nil {
		t.Fatal(err)
	}
}

// SharesDisk says a directory beside the store is on its disk, /dev (a
// file system of its own) is not, and a path that is not there is an error.
func TestSharesDisk(t *testing.T) {
	base := t.TempDir()
	s, err := filestore.Open(filepath.Join(base, "store"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.SharesDisk(base); err != nil || !ok {
		t.Errorf("the store's parent: %v, %v; want true", ok, err)
	}
	if ok, err := s.SharesDisk("/dev"); err != nil || ok {
		t.Errorf("/dev: %v, %v; want false", ok, err)
	}
	if _, err := s.SharesDisk(filepath.Join(base, "absent")); err == nil {
		t.Error("a path that is not there gave no error")
	}
}
