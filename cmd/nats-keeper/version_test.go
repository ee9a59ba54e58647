package main

import (
	"runtime/debug"
	"testing"

	"github.com/nats-keeper/nats-keeper/verbs"
)

// The version is the release's when set at build time, else the module's
// (a pseudo-version naming the revision), else 0.0.0-dev with the revision;
// each is SemVer as it stands, so micro announces it unchanged.
func TestVersionOf(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "dcebab8c1d27af43896520efef9c166c75bf7267"
	for _, c := range []struct {
		name, release string
		bi            *debug.BuildInfo
		want          string
	}{
		{"release", "v1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "1.4.0"},
		{"pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261206021356-dcebab8c1d27+dirty"}, Settings: vcs(rev, "true")},
			"0.0.0-20261206021356-dcebab8c1d27+dirty"},
		{"revision only", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "0.0.0-dev+dcebab8c1d27"},
		{"modified revision", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "0.0.0-dev+dcebab8c1d27.dirty"},
		{"nothing known", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "0.0.0-dev"},
		{"no build information", "", nil, "0.0.0-dev"},
	} {
		got := versionOf(c.release, c.bi)
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if verbs.SemVer(got) != got {
			t.Errorf("%s: %q is not SemVer as micro takes it (announced as %q)", c.name, got, verbs.SemVer(got))
		}
	}
}
