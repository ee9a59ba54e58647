package main

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// The binary links no test code: no package it is built from imports
// testing (serve --embedded and demo take their server from internal/embedded,
// not from the tests' internal/natstest).
func TestBinaryLinksNoTesting(t *testing.T) {
	goBin, err := tools.GoCommand()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "list", "-deps", ".").Output()
	if err != nil {
		var ee *exec.ExitError
		msg := ""
		if errors.As(err, &ee) {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, msg)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) == 0 || !strings.HasSuffix(pkgs[len(pkgs)-1], "/cmd/nats-keeper") {
		t.Fatalf("go list -deps gave no list ending with the command:\n%s", out)
	}
	for _, p := range []string{"github.com/nats-keeper/nats-keeper/jsbus", "github.com/nats-io/nats-server/v2/server"} {
		if !slices.Contains(pkgs, p) {
			t.Fatalf("the list lacks %s, which the binary links; the list is not the binary's:\n%s", p, out)
		}
	}
	var bad []string
	for _, p := range pkgs {
		if p == "testing" || strings.HasPrefix(p, "testing/") {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("the nats-keeper binary links %s; find who imports it with `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/nats-keeper`", strings.Join(bad, ", "))
	}
}
