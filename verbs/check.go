package verbs

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nats-keeper/nats-keeper/kept"
)

// MaxBody bounds one request body, in bytes.
const MaxBody = 64 << 10

const nothingDone = "so nothing was done"

// Verbs lists the verbs a Service answers, one endpoint each: the names of
// the table, kept.Verbs, in its order. Each call returns a new slice.
func Verbs() []string { return kept.VerbNames() }

// badRequest is a request refused before anything was done: its sentence,
// and kept.ErrBadRequest for errors.Is.
func badRequest(verb, format string, args ...any) error {
	return kept.Errorf(kept.ErrBadRequest, "%s %s, %s", verb, fmt.Sprintf(format, args...), nothingDone)
}

// CheckRequest checks that r is a well-formed request for verb: the rules
// (plain names, bounds, required fields, dry-run and aside-only only on
// restore-kept) are kept.CheckRequest's, kept in that one place. Its error
// wraps kept.ErrBadRequest and ends "so nothing was done".
func CheckRequest(verb string, r kept.Request) error {
	return kept.CheckRequest(verb, r)
}

// CheckPrefix checks a subject prefix: dot-separated plain names.
func CheckPrefix(p string) error {
	if p == "" || len(p) > 200 {
		return fmt.Errorf("%w: the prefix %q must be 1 to 200 bytes", kept.ErrBadRequest, clip(p))
	}
	for _, tok := range strings.Split(p, ".") {
		if err := kept.ValidName("a part of the prefix", tok); err != nil {
			return fmt.Errorf("the prefix %q is not dot-separated plain names: %w", clip(p), err)
		}
	}
	return nil
}

// clip shortens a hostile value before it is echoed in a sentence.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
