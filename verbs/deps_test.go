package verbs

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// goListDeps is every package pkg's build holds, each with whether it is of
// the standard library.
func goListDeps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	goBin, err := tools.GoCommand()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, msg)
	}
	deps := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(line, " ")
		deps[path] = std == "true"
	}
	return deps
}

// The contract, kept, is the standard library's only; the service and its
// client link kept and nats.go, and nothing of the engine or the stores: a
// migration hook that imports verbs links no keeper, store, archive or
// encryption.
func TestContractAndVerbsLinkNoEngine(t *testing.T) {
	const mod = "github.com/nats-keeper/nats-keeper/"
	for path, std := range goListDeps(t, "../kept") {
		if !std && path != mod+"kept" {
			t.Errorf("kept imports %s, which is not of the standard library", path)
		}
	}
	under := func(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }
	deps := goListDeps(t, ".")
	if _, ok := deps[mod+"verbs"]; !ok {
		t.Fatalf("go list -deps . did not list verbs itself: %v", deps)
	}
	for path := range deps {
		for _, root := range []string{mod + "keeper", mod + "store", mod + "busarchive", mod + "agecrypt",
			"filippo.io/age", "github.com/klauspost/compress/s2", "github.com/nats-io/nats-server/v2"} {
			if under(path, root) {
				t.Errorf("verbs links %s (under %s), a package of the engine, a store, the archive or encryption", path, root)
			}
		}
	}
}
