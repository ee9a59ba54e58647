package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
)

// release is the release version, set only when a release is built, and
// revision the git revision, for a build whose build information has none
// (go build stamps it only in a git checkout whose .git is a directory, not
// in a git worktree, and not with -buildvcs=false):
//
//	go build -ldflags "-X main.release=1.4.0" ./cmd/nats-keeper
//	go build -ldflags "-X main.revision=$(git rev-parse HEAD)" ./cmd/nats-keeper
//
// The linker sets them; nothing changes them while the program runs.
var release, revision string

// buildVersion is the binary's version (versionOf).
func buildVersion() string {
	return versionOf(release, buildInfo())
}

// buildRevision is the VCS revision the binary was built from, or "".
func buildRevision() string {
	rev, _, _ := vcsOf(buildInfo())
	return rev
}

// buildInfo is the binary's build information, with the revision set at
// build time when it has none of its own; nil when there is none.
func buildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	if rev, _, _ := vcsOf(bi); rev != "" || revision == "" {
		return bi
	}
	with := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	if bi != nil {
		*with = *bi
		with.Settings = append([]debug.BuildSetting{}, bi.Settings...)
	}
	with.Settings = append(with.Settings, debug.BuildSetting{Key: "vcs.revision", Value: revision})
	return with
}

// versionOf is the version of a binary built as release (set at build time,
// or "") and bi (its build information, or nil), always SemVer, so that
// micro and `nats micro ls` take it as it is:
//
//   - the release version, when one was set (a leading "v" dropped);
//   - else the module's version, when the build knows one: a tagged
//     version, or a pseudo-version (0.0.0-<UTC time>-<12 hex of the
//     revision>, "+dirty" when the checkout was modified), which `go build`
//     gives a binary built in a git checkout with VCS stamping (the default,
//     unless -buildvcs=false);
//   - else 0.0.0-dev, with the VCS revision as build metadata when the build
//     has it (0.0.0-dev+<12 hex>, ".dirty" added when modified).
func versionOf(release string, bi *debug.BuildInfo) string {
	if release != "" {
		return strings.TrimPrefix(release, "v")
	}
	if bi == nil {
		return "0.0.0-dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return strings.TrimPrefix(v, "v")
	}
	rev, modified, _ := vcsOf(bi)
	if rev == "" {
		return "0.0.0-dev"
	}
	v := "0.0.0-dev+" + rev[:min(len(rev), 12)]
	if modified {
		v += ".dirty"
	}
	return v
}

// vcsOf is the VCS revision, whether the checkout was modified, and the
// revision's time, as the build information has them ("" when it has none).
func vcsOf(bi *debug.BuildInfo) (rev string, modified bool, at string) {
	if bi == nil {
		return "", false, ""
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		case "vcs.time":
			at = s.Value
		}
	}
	return rev, modified, at
}

type versionOptions struct {
	Out io.Writer
}

func newVersionCmd(e env) *cobra.Command {
	o := versionOptions{Out: e.Out}
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Long: "Print the version: the release version set at build time, else the module's version from the build " +
			"information (a pseudo-version naming the git revision, when built in a git checkout), else 0.0.0-dev; " +
			"then the git revision, the Go version and the embedded nats-server's version.",
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error { return ran(runVersion(cmd.Context(), o)) },
	}
}

func runVersion(_ context.Context, o versionOptions) error {
	bi := buildInfo()
	about := []string{}
	if rev, modified, at := vcsOf(bi); rev != "" {
		r := "revision " + rev
		if modified {
			r += " (modified)"
		}
		if at != "" {
			r += " of " + at
		}
		about = append(about, r)
	}
	about = append(about, runtime.Version(), "embedded nats-server "+server.VERSION)
	_, err := fmt.Fprintf(o.Out, "nats-keeper %s (%s)\n", versionOf(release, bi), strings.Join(about, ", "))
	return err
}
