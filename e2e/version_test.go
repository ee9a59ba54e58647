package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// The binary built from this checkout names its git revision, in
// `nats-keeper version` and in the version micro announces (`nats micro
// ls`), never a bare 0.0.0-dev; the announced version is SemVer.
func TestVersionNamesTheRevision(t *testing.T) {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil || len(strings.TrimSpace(string(out))) < 12 {
		t.Fatalf("the e2e tests run in a git checkout of nats-keeper, but git rev-parse HEAD said %q: %v", out, err)
	}
	rev := strings.TrimSpace(string(out))[:12]
	v, err := exec.Command(keeperBin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("nats-keeper version: %v\n%s", err, v)
	}
	if strings.HasPrefix(string(v), "nats-keeper 0.0.0-dev ") || !strings.Contains(string(v), rev) {
		t.Fatalf("nats-keeper version printed %q, want a version naming revision %s", v, rev)
	}

	tmp := t.TempDir()
	srv := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	nc := connect(t, srv.url())
	k := startKeeper(t, srv.url(), filepath.Join(tmp, "keeper"), tmp)
	waitKeepers(t, nc, 1, k)
	m, err := nc.Request("$SRV.INFO."+verbs.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.Version, rev) || verbs.SemVer(info.Version) != info.Version {
		t.Fatalf("the keeper announced version %q, want SemVer naming revision %s", info.Version, rev)
	}
}
