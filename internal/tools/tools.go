// Package tools installs pinned command-line tools for tests and the benchmark: the nats CLI,
// a nats-server binary, versitygw (an S3 server over a directory) and the age CLI, built through the Go module proxy into a cache
// directory and reused from there.
//
// The cache directory is $NATS_KEEPER_TOOLS when set, else
// <os.UserCacheDir()>/nats-keeper-tools. Each tool lives in its own
// sub-directory named after its version. Several test processes may ask at
// once: an exclusive lock file per tool makes one of them install while the
// others wait. A failed install fails the test; it never skips it.
//
// It imports only the standard library (and runs the go command).
package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// NatsCLIVersion is the natscli version NatsCLI installs.
const NatsCLIVersion = "v0.5.0"

const serverModule = "github.com/nats-io/nats-server/v2"

// VersityGWVersion is the versitygw version VersityGW installs.
const VersityGWVersion = "v1.8.0"

// installTimeout bounds one go install (natscli takes about 45 s cold on a
// small machine, versitygw about 5 minutes).
const installTimeout = 10 * time.Minute

// NatsCLI returns the path of the nats CLI at NatsCLIVersion, installing it
// when missing.
func NatsCLI(t testing.TB) string {
	t.Helper()
	path, err := NatsCLIPath(context.Background())
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	return path
}

// NatsCLIPath is NatsCLI for programs (such as the benchmark): it returns the
// path of the nats CLI at NatsCLIVersion, installing it when missing, or an
// error saying why it could not.
func NatsCLIPath(ctx context.Context) (string, error) {
	return install(ctx, "natscli-"+NatsCLIVersion, "nats", "github.com/nats-io/natscli/nats@"+NatsCLIVersion)
}

// NatsServer returns the path of a nats-server binary at the version this
// module requires, installing it when missing.
func NatsServer(t testing.TB) string {
	t.Helper()
	path, err := NatsServerPath(context.Background())
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	return path
}

// NatsServerPath is NatsServer for programs: it returns the path of a
// nats-server binary at the version this module requires, installing it when
// missing, or an error saying why it could not.
func NatsServerPath(ctx context.Context) (string, error) {
	v, err := ServerVersion()
	if err != nil {
		return "", err
	}
	return install(ctx, "nats-server-"+v, "nats-server", serverModule+"@"+v)
}

// AgeVersion is the age CLI version Age installs: the one the keeper's own
// filippo.io/age is, so e2e tests decrypt a point as an operator would.
const AgeVersion = "v1.3.2"

// Age returns the path of the age CLI at AgeVersion, installing it when
// missing.
func Age(t testing.TB) string {
	t.Helper()
	path, err := install(context.Background(), "age-"+AgeVersion, "age", "filippo.io/age/cmd/age@"+AgeVersion)
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	return path
}

// VersityGW returns the path of versitygw at VersityGWVersion (an S3 server
// for the S3 backend's tests), installing it when missing.
func VersityGW(t testing.TB) string {
	t.Helper()
	path, err := VersityGWPath(context.Background())
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	return path
}

// VersityGWPath is VersityGW for programs: it returns the path of versitygw
// at VersityGWVersion, installing it when missing, or an error saying why it
// could not.
func VersityGWPath(ctx context.Context) (string, error) {
	return install(ctx, "versitygw-"+VersityGWVersion, "versitygw", "github.com/versity/versitygw/cmd/versitygw@"+VersityGWVersion)
}

// ServerVersion is the nats-server version this module requires: the one in
// the running binary's build info, else the one go list reports.
func ServerVersion() (string, error) { return serverVersion() }

// serverVersion is the nats-server version in the build info of the test
// binary, else the one go list reports for the module.
func serverVersion() (string, error) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == serverModule {
				if d.Replace != nil && d.Replace.Version != "" {
					return d.Replace.Version, nil
				}
				if d.Version != "" && d.Version != "(devel)" {
					return d.Version, nil
				}
			}
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", serverModule).Output()
	if err != nil {
		return "", fmt.Errorf("find the nats-server version in go.mod: %w", err)
	}
	v := strings.TrimSpace(string(out))
	if !strings.HasPrefix(v, "v") {
		return "", fmt.Errorf("go list gave %q as the nats-server version", v)
	}
	return v, nil
}

// cacheDir is where tools are kept.
func cacheDir() (string, error) {
	if d := os.Getenv("NATS_KEEPER_TOOLS"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache directory: %w", err)
	}
	return filepath.Join(d, "nats-keeper-tools"), nil
}

// install returns <cache>/<dir>/<bin>, running go install pkg into that
// directory first when the binary is missing.
func install(ctx context.Context, dir, bin, pkg string) (string, error) {
	root, err := cacheDir()
	if err != nil {
		return "", err
	}
	gobin := filepath.Join(root, dir)
	path := filepath.Join(gobin, bin)
	if isExecutable(path) {
		return path, nil
	}
	if err := os.MkdirAll(gobin, 0o700); err != nil {
		return "", fmt.Errorf("make %s: %w, so %s was not installed", gobin, err, pkg)
	}
	unlock, err := lock(filepath.Join(root, dir+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(path) { // another process installed it while we waited
		return path, nil
	}
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", pkg)
	cmd.Dir = root // outside this module, so its go.mod does not interfere
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go install %s failed: %w\n%s", pkg, err, out)
	}
	if !isExecutable(path) {
		return "", fmt.Errorf("go install %s succeeded but %s is not there", pkg, path)
	}
	return path, nil
}

func isExecutable(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o100 != 0
}

// lock takes an exclusive flock on path, waiting for another holder, and
// returns the function that releases it.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the install lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// GoCommand is the path of the go command on PATH, which builds the
// binaries the tests run and installs the tools; the tests need it there
// (go test puts nothing else in their environment that names it).
func GoCommand() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not on PATH, so nothing can be built or installed: %w", err)
	}
	return p, nil
}
