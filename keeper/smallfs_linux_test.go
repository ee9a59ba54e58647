package keeper_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// smallFSEnv, when set, says this test binary runs in a user and mount
// namespace of its own and may mount a tmpfs there.
const smallFSEnv = "NATS_KEEPER_TEST_SMALLFS_CHILD"

// smallFSSize is the tmpfs's size: room for a snapshot of the sample kept
// data (its stored bytes plus the keeper's 64 MiB margin) and not much more.
const smallFSSize = 72 << 20

// TestSmallFileSystem runs the keeper's file store on a real tmpfs of a
// fixed size. The test runs itself again in a user and mount namespace of
// its own (so it needs no privilege, and the mount goes with the process):
//   - a snapshot that cannot fit is refused up front with the free and the
//     needed bytes and the place, and writes nothing;
//   - a restore whose aside cannot fit is refused and leaves the live data
//     whole;
//   - a disk that fills after the check fails the snapshot with the
//     file system's own error, and leaves no point, no record and no
//     leftover file, and the point taken before is whole;
//   - once there is room again, the same snapshot succeeds.
func TestSmallFileSystem(t *testing.T) {
	if os.Getenv(smallFSEnv) == "" {
		runInOwnMountNamespace(t)
		return
	}
	// Nothing mounted here reaches the parent's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("making the test's own mounts private: %v", err)
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=72m,mode=0700"); err != nil {
		t.Fatalf("mounting a %d MiB tmpfs on %s: %v", smallFSSize>>20, mnt, err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	dir := filepath.Join(mnt, "keeper")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var fillAt string // a filler file the step hook writes until the disk is full
	e := newEnv(t, func(c *keeper.Config) {
		c.Store = fileStore(t, dir)
		c.StepHook = func(step string) {
			if step == "snapshot:room-checked" && fillAt != "" {
				fill(t, fillAt, -1)
			}
		}
	})
	e.dir = dir
	first := e.snapshot(1, "fits")

	// Up front: leave less free than the margin alone.
	filler := filepath.Join(mnt, "filler")
	fill(t, filler, free(t, dir)-60<<20)
	_, err := e.k.SnapshotKept(e.ctx, req(2, "too-big"))
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("a snapshot on a full file system: got %v, want a failure", err)
	}
	t.Logf("the snapshot refused up front: %v", err)
	mustContain(t, err.Error(), "was not taken", "MiB free", "needs about", "so nothing was written", dir)
	if _, err := os.Lstat(filepath.Join(dir, "points", module, local, "f2-too-big")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused snapshot wrote its directory: %v", err)
	}
	e.change()
	live := e.kept()
	if _, err := e.k.RestoreKept(e.ctx, req(1, "fits")); !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("a restore whose aside cannot fit: got %v, want a failure", err)
	} else {
		mustContain(t, err.Error(), "MiB free", "needs about")
	}
	if d := diffKept(e, live); d != "" {
		t.Errorf("a restore refused for room changed the bus:\n%s", d)
	}

	// Part way: the check passes, then the disk fills before the archive
	// is written.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	before := filesUnder(t, dir)
	fillAt = filepath.Join(mnt, "filler-midway")
	_, err = e.k.SnapshotKept(e.ctx, req(2, "fills"))
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("a snapshot that filled the disk: got %v, want a failure", err)
	}
	t.Logf("the snapshot that filled the disk: %v", err)
	mustContain(t, err.Error(), "was not taken", "no space left on device", "no point")
	if after := filesUnder(t, dir); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("a snapshot that failed for room left files behind:\nbefore %q\nafter  %q", before, after)
	}
	rep, err := e.k.ListKept(e.ctx, keeper.Request{Module: module})
	if err != nil || len(rep.Points) != 1 || rep.Points[0].Fingerprint != "fits" {
		t.Fatalf("after the failed snapshot the points are %+v (%v); want only f1-fits", rep, err)
	}
	if _, err := e.k.VerifyKept(e.ctx, req(1, "fits")); err != nil {
		t.Errorf("the point taken before the disk filled: %v", err)
	}

	// Room again: the same snapshot goes through.
	fillAt = ""
	if err := os.Remove(filepath.Join(mnt, "filler-midway")); err != nil {
		t.Fatal(err)
	}
	e.snapshot(2, "fills")
	if _, err := e.k.VerifyKept(e.ctx, req(2, "fills")); err != nil {
		t.Errorf("the snapshot once there was room: %v", err)
	}
	if first.Point == nil {
		t.Fatal("the first snapshot's reply holds no point")
	}
}

// runInOwnMountNamespace runs this one test again as a child process in a
// new user and mount namespace, where it is root and may mount, and fails
// if the child fails.
func runInOwnMountNamespace(t *testing.T) {
	args := []string{"-test.run", "^" + t.Name() + "$", "-test.v", "-test.timeout", "10m"}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), smallFSEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
	out, err := cmd.CombinedOutput()
	if err != nil && os.Geteuid() == 0 && len(out) == 0 {
		// Where user namespaces are turned off, root can still have a
		// mount namespace of its own.
		t.Logf("no user namespace (%v); as root, a mount namespace alone", err)
		cmd = exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), smallFSEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
		out, err = cmd.CombinedOutput()
	}
	t.Logf("the test in its own mount namespace:\n%s", out)
	if err != nil {
		t.Fatalf("the test in its own user and mount namespace failed (%v); it needs unprivileged user namespaces (kernel.unprivileged_userns_clone) or root", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the child process did not run the test")
	}
}

// free is what statfs says is free under dir.
func free(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill writes n bytes to the file at path, or, with n < 0, writes until the
// file system is full.
func fill(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n < 0 || n > 0 {
		p := buf
		if n > 0 && n < int64(len(p)) {
			p = p[:n]
		}
		w, err := f.Write(p)
		n -= int64(w)
		if err != nil {
			if n < 0 && errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatalf("filling %s: %v", path, err)
		}
		if n < 0 && w == 0 {
			return
		}
	}
}

// filesUnder lists every path under dir, relative to it.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSmallVolumeTakesASmallMargin: on a real 8 MiB tmpfs, a snapshot of
// the small sample kept data is refused with the default margin (64 MiB),
// in a sentence that names --free-margin, and taken by a keeper with a
// margin of 256 KiB (serve --free-margin 256KiB). Run, as
// TestSmallFileSystem is, in a user and mount namespace of its own.
func TestSmallVolumeTakesASmallMargin(t *testing.T) {
	if os.Getenv(smallFSEnv) == "" {
		runInOwnMountNamespace(t)
		return
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("making the test's own mounts private: %v", err)
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=8m,mode=0700"); err != nil {
		t.Fatalf("mounting an 8 MiB tmpfs on %s: %v", mnt, err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	e := newEnv(t, func(c *keeper.Config) { c.Store = fileStore(t, mnt) })
	e.dir = mnt
	_, err := e.k.SnapshotKept(e.ctx, req(1, "default-margin"))
	if !errors.Is(err, keeper.ErrFailed) {
		t.Fatalf("a snapshot on an 8 MiB volume with the default margin: got %v, want a refusal", err)
	}
	mustContain(t, err.Error(), "a margin of 64.0 MiB", "--free-margin", "so nothing was written")

	k, err := e.keeperOn(mnt, func(c *keeper.Config) { c.FreeMargin, c.Logger = 256<<10, nil })
	if err != nil {
		t.Fatal(err)
	}
	rep, err := k.SnapshotKept(e.ctx, req(1, "small-margin"))
	if err != nil {
		t.Fatalf("a snapshot with a margin of 256 KiB on an 8 MiB volume with %d bytes free: %v", free(t, mnt), err)
	}
	if _, err := k.VerifyKept(e.ctx, req(1, "small-margin")); err != nil {
		t.Errorf("the point taken with a small margin: %v", err)
	}
	t.Logf("took %s on the 8 MiB volume: %s", rep.Dir, rep.Said)
}
