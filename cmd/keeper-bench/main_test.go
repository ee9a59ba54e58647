package main

import (
	"strings"
	"testing"
)

// TestFlagsRefused: flags that cannot go together, or bad values, stop the
// run before anything is started (exit 2, with a sentence).
func TestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		said string
	}{
		{[]string{"-cluster", "-stores", "file"}, "the cluster comparison measures the file backend only"},
		{[]string{"-size", "lots"}, "-size:"},
		{[]string{"-stores", "nats"}, "-stores:"},
		{[]string{"extra"}, "takes no arguments"},
		{[]string{"-shapes", "random,tape"}, "-shapes:"},
		{[]string{"-points", "100,lots"}, "-points:"},
	} {
		var out strings.Builder
		if code := run(tc.args, &out); code != 2 || !strings.Contains(out.String(), tc.said) {
			t.Errorf("run(%q) = %d, %q; want 2 and %q", tc.args, code, out.String(), tc.said)
		}
	}
}
