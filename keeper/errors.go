package keeper

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a verb returns wraps exactly one of these; Code
// and ExitCode map them to the wire and to the CLI in this one place.
var (
	ErrBadRequest = errors.New("bad request")
	ErrNotFound   = errors.New("not found")
	ErrBusy       = errors.New("busy")
	ErrConflict   = errors.New("conflict")
	ErrFailed     = errors.New("failed")
	ErrNoBus      = errors.New("no bus reachable")
	// ErrDenied: the NATS server refused the caller's user the subject of the
	// request, so it never reached a keeper.
	ErrDenied = errors.New("denied by the server's permissions")
)

// Wire codes (Nats-Service-Error-Code).
const (
	CodeBadRequest = 400
	CodeNotFound   = 404
	CodeConflict   = 409
	CodeFailed     = 500
	CodeNoBus      = 503
	CodeDenied     = 403 // never sent by a keeper: the server refused the request first
)

// CLI exit codes.
const (
	ExitOK        = 0
	ExitFailed    = 1
	ExitUsage     = 2
	ExitNotFound  = 3
	ExitBusy      = 4
	ExitNoService = 5
	ExitDenied    = 6
)

// Code is the wire code for err.
func Code(err error) int {
	switch {
	case err == nil:
		return 200
	case errors.Is(err, ErrBadRequest):
		return CodeBadRequest
	case errors.Is(err, ErrNotFound):
		return CodeNotFound
	case errors.Is(err, ErrBusy), errors.Is(err, ErrConflict):
		return CodeConflict
	case errors.Is(err, ErrNoBus):
		return CodeNoBus
	case errors.Is(err, ErrDenied):
		return CodeDenied
	default:
		return CodeFailed
	}
}

// KindOf is the sentinel for a wire code, so a client can rebuild an error
// that errors.Is recognises.
func KindOf(code int) error {
	switch code {
	case CodeBadRequest:
		return ErrBadRequest
	case CodeNotFound:
		return ErrNotFound
	case CodeConflict:
		return ErrConflict
	case CodeNoBus:
		return ErrNoBus
	case CodeDenied:
		return ErrDenied
	default:
		return ErrFailed
	}
}

// ExitCode is the documented CLI exit code for err.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrBadRequest):
		return ExitUsage
	case errors.Is(err, ErrNotFound):
		return ExitNotFound
	case errors.Is(err, ErrBusy), errors.Is(err, ErrConflict):
		return ExitBusy
	case errors.Is(err, ErrNoBus):
		return ExitNoService
	case errors.Is(err, ErrDenied):
		return ExitDenied
	default:
		return ExitFailed
	}
}

// kindError is a sentence that maps to a sentinel without the sentinel's
// words in its text.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// errorf formats a sentence (with %w allowed) that errors.Is matches to kind.
func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}

// withKind marks err as kind unless it already carries a sentinel.
func withKind(kind, err error) error {
	for _, s := range []error{ErrBadRequest, ErrNotFound, ErrBusy, ErrConflict, ErrFailed, ErrNoBus, ErrDenied} {
		if errors.Is(err, s) {
			return err
		}
	}
	return &kindError{kind: kind, err: err}
}
