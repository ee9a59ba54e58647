package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// testHookVars are the environment variables of the test hooks
// (crashhook.go), which only a build with -tags testhooks reads.
var testHookVars = []string{
	"NATS_KEEPER_CRASH_AT",
	"NATS_KEEPER_TEST_HOLD_AT",
	"NATS_KEEPER_TEST_HOLD_UNTIL",
	"NATS_KEEPER_TEST_HANG_VERB",
	"NATS_KEEPER_TEST_CLOCK",
	"NATS_KEEPER_TEST_SCHEDULE_TICK",
}

// testHookTraces are what a grep of a release binary looks for: parts of the
// hooks' variable names, and words of the hooks' own log lines.
var testHookTraces = []string{
	"NATS_KEEPER_CRASH_AT", "_HOLD_AT", "_HOLD_UNTIL", "_HANG_VERB", "TEST_CLOCK", "TEST_SCHEDULE_TICK",
	"crash test:", "hold test:", "hang test:", "clock test:", "schedule test:",
}

// A release build of nats-keeper (go build as the README says, with its
// release flags, and with deploy/Dockerfile's flags) holds none of the test
// hooks: no trace of their variables' names or their log lines. A build with
// -tags testhooks, as the tests that set the hooks build it, holds every one
// of the variables' names, so those tests cannot lose their hooks unseen.
func TestReleaseBuildHasNoTestHooks(t *testing.T) {
	checkDockerfileBuild(t)
	releases := []struct {
		name  string
		env   []string
		flags []string
	}{
		{"go build", nil, nil},
		{"README's release flags", nil, []string{"-ldflags", "-X main.release=1.4.0"}},
		{"deploy/Dockerfile's flags", []string{"CGO_ENABLED=0"}, []string{"-trimpath", "-ldflags", "-s -w"}},
	}
	for _, r := range releases {
		t.Run(r.name, func(t *testing.T) {
			bin := goBuild(t, r.env, r.flags...)
			for _, s := range testHookTraces {
				if bytes.Contains(bin, []byte(s)) {
					t.Errorf("the release build (%s) holds %q, a trace of a test hook", strings.Join(r.flags, " "), s)
				}
			}
		})
	}
	t.Run("-tags testhooks", func(t *testing.T) {
		bin, err := os.ReadFile(buildKeeper(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range testHookVars {
			if !bytes.Contains(bin, []byte(s)) {
				t.Errorf("the build with -tags testhooks does not hold %q: the tests that set it would lose its hook", s)
			}
		}
	})
}

// dockerBuildRE finds the go build command of deploy/Dockerfile.
var dockerBuildRE = regexp.MustCompile(`(?m)^RUN (.*)go build (.*) ./cmd/nats-keeper`)

// checkDockerfileBuild fails unless deploy/Dockerfile builds nats-keeper
// with the flags TestReleaseBuildHasNoTestHooks builds it with, and with no
// build tag.
func checkDockerfileBuild(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := dockerBuildRE.FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal("deploy/Dockerfile has no `RUN ... go build ... ./cmd/nats-keeper` line")
	}
	if got := strings.TrimSpace(m[1]) + " | " + m[2]; got != `CGO_ENABLED=0 | -trimpath -ldflags "-s -w" -o /out/nats-keeper` {
		t.Errorf("deploy/Dockerfile builds nats-keeper with %q; this test builds it with CGO_ENABLED=0 and -trimpath -ldflags \"-s -w\": make them the same", got)
	}
}

// goBuild builds nats-keeper into a temporary directory with env and flags
// and returns the binary's bytes.
func goBuild(t *testing.T, env []string, flags ...string) []byte {
	t.Helper()
	goBin, err := tools.GoCommand()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "nats-keeper")
	cmd := exec.Command(goBin, append(append([]string{"build", "-o", out}, flags...), ".")...)
	cmd.Env = append(os.Environ(), env...)
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(flags, " "), err, log)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
