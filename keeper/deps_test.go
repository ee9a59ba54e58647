package keeper_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// The keeper's core talks to the bus only through its interfaces (Bus,
// Index, Acts): no NATS client, no JetStream library and no server may be
// built into it, whatever it imports; nor Prometheus' client. server/archive, the snapshot's entry
// format, is a leaf package of the server module that imports neither.
func TestKeeperImportsNoNATSClientOrServer(t *testing.T) {
	goBin, err := tools.GoCommand()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "list", "-deps", ".")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, msg)
	}
	forbidden := func(pkg string) bool {
		under := func(root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }
		switch {
		case under("github.com/nats-io/nats.go"), under("github.com/nats-io/jsm.go"):
			return true
		case under("github.com/prometheus"): // metrics hear the keeper through its Observer
			return true
		case pkg == "github.com/nats-io/nats-server/v2/server/archive":
			return false
		}
		return under("github.com/nats-io/nats-server/v2/server")
	}
	lines := strings.Fields(string(out))
	var bad []string
	for _, pkg := range lines {
		if forbidden(pkg) {
			bad = append(bad, pkg)
		}
	}
	if len(lines) == 0 || !strings.HasSuffix(lines[len(lines)-1], "/keeper") {
		t.Fatalf("go list -deps gave no list ending with the keeper:\n%s", out)
	}
	if len(bad) > 0 {
		t.Fatalf("the keeper's build holds %d packages of a NATS client, jsm.go, the server or Prometheus:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
}
