package verbs

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// MaxBody bounds one request body, in bytes.
const MaxBody = 64 << 10

const nothingDone = "so nothing was done"

// The verbs, as they appear in subjects (<prefix>.<verb>).
const (
	VerbSnapshot = keeper.VerbSnapshot
	VerbRestore  = keeper.VerbRestore
	VerbDiscard  = keeper.VerbDiscard
	VerbList     = keeper.VerbList
	VerbVerify   = keeper.VerbVerify
	VerbPrune    = keeper.VerbPrune
	// The plan verbs.
	VerbSetPlan    = keeper.VerbSetPlan
	VerbShowPlan   = keeper.VerbShowPlan
	VerbRemovePlan = keeper.VerbRemovePlan
	// VerbShowEvidence reads back a restore's evidence report.
	VerbShowEvidence = keeper.VerbShowEvidence
	// VerbDiscardPoint removes one restore point on a person's call.
	VerbDiscardPoint = keeper.VerbDiscardPoint
)

// Verbs lists the verbs a Service answers, one endpoint each, in the order
// the contract gives them, then prune-kept, the plan verbs, show-evidence
// and discard-point. Each call returns a new slice.
func Verbs() []string {
	return []string{VerbSnapshot, VerbRestore, VerbDiscard, VerbList, VerbVerify, VerbPrune,
		VerbSetPlan, VerbShowPlan, VerbRemovePlan, VerbShowEvidence, VerbDiscardPoint}
}

// badRequest is a request refused before anything was done: its sentence,
// and keeper.ErrBadRequest for errors.Is.
func badRequest(verb, format string, args ...any) error {
	return keeper.Errorf(keeper.ErrBadRequest, "%s %s, %s", verb, fmt.Sprintf(format, args...), nothingDone)
}

// CheckRequest checks that r is a well-formed request for verb: the rules
// (plain names, bounds, required fields, dry-run and aside-only only on
// restore-kept) are keeper.CheckRequest's, kept in that one place. Its error
// wraps keeper.ErrBadRequest and ends "so nothing was done".
func CheckRequest(verb string, r keeper.Request) error {
	return keeper.CheckRequest(verb, r)
}

// CheckPrefix checks a subject prefix: dot-separated plain names.
func CheckPrefix(p string) error {
	if p == "" || len(p) > 200 {
		return fmt.Errorf("%w: the prefix %q must be 1 to 200 bytes", keeper.ErrBadRequest, clip(p))
	}
	for _, tok := range strings.Split(p, ".") {
		if err := keeper.ValidName("a part of the prefix", tok); err != nil {
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
