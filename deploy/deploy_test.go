// Package deploy holds the files that run nats-keeper as a service: a
// systemd unit and a container image. Its tests check them against the
// binary they run.
package deploy_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// keeperBin builds nats-keeper into a temporary directory.
func keeperBin(t *testing.T) string {
	t.Helper()
	goBin, err := tools.GoCommand()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nats-keeper")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "../cmd/nats-keeper")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// flagRE finds the --flags the unit or image passes to serve.
var flagRE = regexp.MustCompile(`--[a-z][a-z-]+`)

func checkFlags(t *testing.T, bin, what, text string) {
	t.Helper()
	help, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, help)
	}
	for _, f := range flagRE.FindAllString(text, -1) {
		if !bytes.Contains(help, []byte(f+" ")) {
			t.Errorf("%s passes %s, which serve does not take", what, f)
		}
	}
}

// The deployment files, checked against one build of the binary.
func TestDeployFiles(t *testing.T) {
	bin := keeperBin(t)
	t.Run("unit", func(t *testing.T) { checkUnit(t, bin) })
	t.Run("image", func(t *testing.T) { checkDockerfile(t, bin) })
}

// The unit file passes `systemd-analyze verify` with no complaint (it
// prints unknown keys and bad values but still exits 0, so its output must
// be empty), runs as a user of its own with a StateDirectory, sandboxed,
// restarted on failure, and passes serve only flags it takes.
func checkUnit(t *testing.T, bin string) {
	unit, err := os.ReadFile("nats-keeper.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nUser=nats-keeper\n", "\nStateDirectory=nats-keeper\n", "\nStateDirectoryMode=0700\n",
		"\nRestart=on-failure\n", "\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n", "\nCapabilityBoundingSet=\n"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	exec1 := regexp.MustCompile(`(?s)\nExecStart=(.*?[^\\])\n`).FindSubmatch(unit)
	if exec1 == nil {
		t.Fatal("the unit has no ExecStart")
	}
	checkFlags(t, bin, "the unit", string(exec1[1]))
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed here: the unit is checked by the assertions above only")
		return
	}
	// verify needs ExecStart's binary to exist: the one just built.
	dir := t.TempDir()
	local := filepath.Join(dir, "nats-keeper.service")
	if err := os.WriteFile(local, bytes.ReplaceAll(unit, []byte("/usr/local/bin/nats-keeper"), []byte(bin)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", local).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The image is built static, runs as a user that is not root, keeps the
// directory as a volume, and passes serve only flags it takes.
func checkDockerfile(t *testing.T, bin string) {
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "\nFROM scratch\n", "\nUSER 65532:65532\n",
		"\nVOLUME [\"/var/lib/nats-keeper\"]\n", "chmod 0700 /out/var/lib/nats-keeper", "--chown=65532:65532 /out/var/lib/nats-keeper"} {
		if !bytes.Contains(df, []byte(want)) {
			t.Errorf("the Dockerfile lacks %q", strings.TrimSpace(want))
		}
	}
	entry := regexp.MustCompile(`\nENTRYPOINT (\[.*\])\n`).FindSubmatch(df)
	if entry == nil {
		t.Fatal("the Dockerfile has no ENTRYPOINT")
	}
	checkFlags(t, bin, "the image's ENTRYPOINT", string(entry[1]))
}
