package tools

import (
	"os/exec"
	"strings"
	"testing"
)

func TestNatsCLI(t *testing.T) {
	path := NatsCLI(t)
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", path, err, out)
	}
	if !strings.Contains(string(out), strings.TrimPrefix(NatsCLIVersion, "v")) {
		t.Fatalf("%s --version says %q, want %s", path, out, NatsCLIVersion)
	}
	if again := NatsCLI(t); again != path {
		t.Fatalf("second call gave %s, first %s", again, path)
	}
}

func TestNatsServer(t *testing.T) {
	path := NatsServer(t)
	v, err := serverVersion()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", path, err, out)
	}
	if !strings.Contains(string(out), strings.TrimPrefix(v, "v")) {
		t.Fatalf("%s --version says %q, want %s", path, out, v)
	}
}

func TestAge(t *testing.T) {
	path := Age(t)
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", path, err, out)
	}
	if !strings.Contains(string(out), AgeVersion) {
		t.Fatalf("%s --version says %q, want %s", path, out, AgeVersion)
	}
}

func TestVersityGW(t *testing.T) {
	path := VersityGW(t)
	// Its --version prints "git" unless built with ldflags, so the module
	// version comes from the binary's build info.
	out, err := exec.Command("go", "version", "-m", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m %s: %v\n%s", path, err, out)
	}
	if !strings.Contains(string(out), "github.com/versity/versitygw\t"+VersityGWVersion) {
		t.Fatalf("go version -m %s says %q, want versitygw %s", path, out, VersityGWVersion)
	}
	if out, err := exec.Command(path, "--version").CombinedOutput(); err != nil {
		t.Fatalf("%s --version: %v\n%s", path, err, out)
	}
}
