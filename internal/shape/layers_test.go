package shape_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layers says, for each package of the module, which of the module's
// packages its production files may import (a trailing "/..." takes the
// packages under a path too). "*" is the wiring, which may import any
// production package. A package missing here fails the test, so a new one
// gets its line.
var layers = map[string][]string{
	"kept":              {},
	"busarchive":        {"kept", "internal/lowprio"},
	"agecrypt":          {"store"},
	"store":             {},
	"store/filestore":   {"store"},
	"store/natsstore":   {"store", "internal/jsretry"},
	"store/s3store":     {"store"},
	"store/storetest":   {"store"},
	"keeper":            {"kept", "keeper/...", "transfer", "store", "busarchive", "agecrypt"},
	"keeper/layout":     {"kept", "store"},
	"keeper/archives":   {"kept", "keeper/layout", "store", "busarchive", "agecrypt"},
	"keeper/spool":      {"busarchive", "store"},
	"transfer":          {"kept", "keeper/layout", "keeper/archives", "store", "busarchive", "agecrypt"},
	"verbs":             {"kept"},
	"jsbus":             {"kept", "keeper", "internal/jsretry"},
	"internal/jsretry":  {},
	"internal/outbox":   {"kept", "keeper"},
	"internal/metrics":  {"kept", "keeper", "verbs"},
	"internal/privdir":  {},
	"internal/lowprio":  {},
	"internal/embedded": {},
	"internal/sample":   {},
	"internal/wiring":   {"*"},
	"cmd/nats-keeper":   {"*"},
	"cmd/keeper-bench":  {"bench"},
	"keepertest":        {"*"},
	"bench":             {"*", "internal/tools"},
	// Test helpers: imported by tests (and the benchmark's tool installs).
	"internal/jstest":   {"kept", "keeper", "internal/natstest"},
	"internal/natstest": {"internal/embedded"},
	"internal/s3test":   {"internal/tools", "internal/syncbuf"},
	"internal/tartest":  {},
	"internal/syncbuf":  {},
	"internal/tools":    {},
	"internal/shape":    {},
	"internal/testbed":  {"*", "internal/natstest", "internal/jstest"},
	"internal/fault":    {"kept", "keeper", "store"},
}

// testHelpers are never imported by a production file outside them.
var testHelpers = []string{"internal/jstest", "internal/natstest", "internal/s3test", "internal/tartest",
	"internal/syncbuf", "internal/shape", "internal/testbed", "internal/fault"}

type pkgInfo struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []pkgInfo {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkgInfo
	for dec.More() {
		var p pkgInfo
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func allowed(rules []string, imp string) bool {
	for _, r := range rules {
		if r == imp || (strings.HasSuffix(r, "/...") && strings.HasPrefix(imp, strings.TrimSuffix(r, "..."))) {
			return true
		}
		if r == "*" && !slices.Contains(testHelpers, imp) {
			return true
		}
	}
	return false
}

// TestLayers: each package imports only the module's packages its layer
// allows, and no production package imports a test helper.
func TestLayers(t *testing.T) {
	for _, p := range listPackages(t) {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		if name == "" || strings.HasPrefix(name, "e2e") || strings.HasPrefix(name, "deploy") || strings.HasPrefix(name, "examples") {
			continue
		}
		rules, ok := layers[name]
		if !ok {
			t.Errorf("%s has no line in the layers table", name)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			if in := strings.TrimPrefix(imp, mod+"/"); !allowed(rules, in) {
				t.Errorf("%s imports %s, which its layer does not allow", name, in)
			}
		}
	}
}

// TestContractAndVerbsStayLight: the contract links only the standard
// library, and the service and client (what a migration hook imports) link
// nats.go and the contract, nothing of the engine, the stores or the
// archive's compression and encryption.
func TestContractAndVerbsStayLight(t *testing.T) {
	for _, p := range listPackages(t) {
		switch strings.TrimPrefix(p.ImportPath, mod+"/") {
		case "kept":
			for _, d := range p.Deps {
				if strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
					t.Errorf("kept depends on %s, outside the standard library", d)
				}
			}
		case "verbs":
			for _, d := range p.Deps {
				for _, bad := range []string{mod + "/keeper", mod + "/store", mod + "/busarchive", mod + "/agecrypt", "filippo.io/age", "github.com/klauspost/compress/s2"} {
					if d == bad || strings.HasPrefix(d, bad+"/") {
						t.Errorf("verbs depends on %s", d)
					}
				}
			}
		case "keeper":
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "github.com/nats-io/nats.go") {
					t.Errorf("keeper depends on %s, a NATS client", d)
				}
			}
		}
	}
}
