package verbs

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// Bounds on what a request may carry.
const (
	MaxBody     = 64 << 10 // bytes of one request body
	MaxName     = 128      // bytes of one plain name
	MaxAsideID  = 3*MaxName + 64
	MaxFrom     = 4096 // bytes of a restore point directory
	MaxCaller   = 256
	MaxWhy      = 4096
	MaxCatchUp  = 256
	MaxForm     = 1 << 30
	nothingDone = "so nothing was done"
)

// ValidName reports why s is not a plain name (design.md: non-empty, not "."
// or "..", free of / \ NUL space * > . and at most MaxName bytes), or nil.
//
// It belongs in keeper (one place for the rule); it lives here until the
// keeper owns it.
func ValidName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("is empty")
	case len(s) > MaxName:
		return fmt.Errorf("is %d bytes long, more than the %d allowed", len(s), MaxName)
	case s == "." || s == "..":
		return fmt.Errorf("is %q", s)
	case !utf8.ValidString(s):
		return fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case r == '/' || r == '\\' || r == 0 || r == '*' || r == '>' || r == '.':
			return fmt.Errorf("contains %q", r)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("contains the space or control character %U", r)
		}
	}
	return nil
}

// validAsideID checks an aside id: dot-separated plain names, so it can never
// name anything outside the keeper's aside directory.
func validAsideID(s string) error {
	if s == "" {
		return fmt.Errorf("is empty")
	}
	if len(s) > MaxAsideID {
		return fmt.Errorf("is %d bytes long, more than the %d allowed", len(s), MaxAsideID)
	}
	for _, tok := range strings.Split(s, ".") {
		if err := ValidName(tok); err != nil {
			return fmt.Errorf("has a part that %w", err)
		}
	}
	return nil
}

// validText checks free text a person wrote (caller, why, catch-up).
func validText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("is %d bytes long, more than the %d allowed", len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("contains the control character %U", r)
		}
	}
	return nil
}

func badRequest(verb, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s, %s", keeper.ErrBadRequest, verb, fmt.Sprintf(format, args...), nothingDone)
}

// CheckRequest checks that r is a well-formed request for verb: every name a
// plain name, the fields the verb needs present, and nothing out of bounds. Its
// error wraps keeper.ErrBadRequest and ends "so nothing was done".
func CheckRequest(verb string, r keeper.Request) error {
	name := func(field, v string, required bool) error {
		if v == "" && !required {
			return nil
		}
		if err := ValidName(v); err != nil {
			return badRequest(verb, "was refused: %s %q %v", field, clip(v), err)
		}
		return nil
	}
	text := func(field, v string, max int) error {
		if err := validText(v, max); err != nil {
			return badRequest(verb, "was refused: %s %v", field, err)
		}
		return nil
	}
	if err := text("caller", r.Caller, MaxCaller); err != nil {
		return err
	}
	if err := text("why", r.Why, MaxWhy); err != nil {
		return err
	}
	if err := text("catch-up", r.CatchUp, MaxCatchUp); err != nil {
		return err
	}
	if r.Form < 0 || r.Form > MaxForm {
		return badRequest(verb, "was refused: form %d is outside 0..%d", r.Form, MaxForm)
	}
	pointKey := func() error {
		if err := name("module", r.Module, true); err != nil {
			return err
		}
		if err := name("local", r.Local, true); err != nil {
			return err
		}
		return name("fingerprint", r.Fingerprint, true)
	}
	switch verb {
	case VerbSnapshot:
		return firstErr(pointKey(), onlyFor(verb, r.From != "", "from"), onlyFor(verb, r.AsideOnly, "aside-only"),
			onlyFor(verb, r.DryRun, "dry-run"))
	case VerbRestore:
		if r.Why == "" {
			return badRequest(verb, "needs why: say why the live data is being replaced")
		}
		if len(r.From) > MaxFrom || strings.ContainsRune(r.From, 0) {
			return badRequest(verb, "was refused: from is longer than %d bytes or contains NUL", MaxFrom)
		}
		if err := firstErr(name("module", r.Module, true), name("local", r.Local, true)); err != nil {
			return err
		}
		if r.AsideOnly || r.From != "" {
			return name("fingerprint", r.Fingerprint, false)
		}
		return name("fingerprint", r.Fingerprint, true)
	case VerbDiscard:
		if err := firstErr(onlyFor(verb, r.AsideOnly, "aside-only"), onlyFor(verb, r.DryRun, "dry-run")); err != nil {
			return err
		}
		if err := validAsideID(r.From); err != nil {
			return badRequest(verb, "was refused: the aside id (from) %q %v", clip(r.From), err)
		}
		if r.Why == "" {
			return badRequest(verb, "needs why: say why this set-aside copy may be removed")
		}
		return firstErr(name("module", r.Module, false), name("local", r.Local, false))
	case VerbList:
		if r.Local != "" && r.Module == "" {
			return badRequest(verb, "was refused: local is given without module")
		}
		return firstErr(name("module", r.Module, false), name("local", r.Local, false))
	case VerbVerify:
		return pointKey()
	}
	return badRequest(verb, "is not a verb of nats-keeper")
}

func onlyFor(verb string, set bool, field string) error {
	if set {
		return badRequest(verb, "does not take %s", field)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
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
