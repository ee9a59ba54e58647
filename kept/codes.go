package kept

import "errors"

// Wire codes of a failure reply (the Nats-Service-Error-Code header and the
// error body's code), one for each error kind (see kinds).
const (
	CodeBadRequest = 400 // ErrBadRequest: refused, nothing was done
	CodeNotFound   = 404 // ErrNotFound
	CodeConflict   = 409 // ErrConflict, and ErrBusy (the error body's busy)
	CodeFailed     = 500 // ErrFailed, and an error of no kind
	CodeNoBus      = 503 // ErrNoBus: the keeper is stopping, or could not reach the bus
	CodeLocked     = 423 // ErrLocked: the archive is encrypted and the keeper holds no identity that decrypts it
	// CodeDenied is never sent by a keeper: the client gives it to a request
	// the NATS server refused before it reached one (ErrDenied).
	CodeDenied = 403
	// CodeCutShort is never sent by a keeper: the client gives it to a
	// verb whose keeper stopped answering before it replied, when no
	// outcome was known (ErrCutShort).
	CodeCutShort = 504
)

// Exit codes of the nats-keeper CLI, as the README and `nats-keeper --help`
// list them, one for each error kind (see kinds).
const (
	ExitOK        = 0
	ExitFailed    = 1 // ErrFailed, and an error of no kind
	ExitUsage     = 2 // ErrBadRequest, and a command line the CLI refuses
	ExitNotFound  = 3 // ErrNotFound
	ExitBusy      = 4 // ErrBusy and ErrConflict
	ExitNoService = 5 // ErrNoBus
	ExitDenied    = 6 // ErrDenied
	ExitLocked    = 7 // ErrLocked
	ExitCutShort  = 8 // ErrCutShort
)

// kinds is the one mapping of error kinds to their wire and exit codes, in
// the order KindOf tries them (a busy error is ErrBusy before ErrConflict).
var kinds = [...]struct {
	kind       error
	wire, exit int
}{
	{ErrBadRequest, CodeBadRequest, ExitUsage},
	{ErrNotFound, CodeNotFound, ExitNotFound},
	{ErrBusy, CodeConflict, ExitBusy},
	{ErrConflict, CodeConflict, ExitBusy},
	{ErrLocked, CodeLocked, ExitLocked},
	{ErrFailed, CodeFailed, ExitFailed},
	{ErrNoBus, CodeNoBus, ExitNoService},
	{ErrDenied, CodeDenied, ExitDenied},
	{ErrCutShort, CodeCutShort, ExitCutShort},
}

// KindOf is the kind err carries: ErrBadRequest, ErrNotFound, ErrBusy,
// ErrConflict, ErrLocked, ErrFailed, ErrNoBus, ErrDenied or ErrCutShort,
// whichever errors.Is finds first in that order (so a busy error is
// ErrBusy, not ErrConflict). It is nil for a nil error and for an error
// that carries no kind.
func KindOf(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.kind
		}
	}
	return nil
}

// WireCode is the wire code for err: 200 for nil, else the code of its
// kind (KindOf), CodeFailed for an error of no kind.
func WireCode(err error) int {
	if err == nil {
		return 200
	}
	kind := KindOf(err)
	for _, k := range kinds {
		if k.kind == kind {
			return k.wire
		}
	}
	return CodeFailed
}

// ExitCode is the CLI's exit code for err: ExitOK for nil, else the code of
// its kind (KindOf), ExitFailed for an error of no kind.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	kind := KindOf(err)
	for _, k := range kinds {
		if k.kind == kind {
			return k.exit
		}
	}
	return ExitFailed
}

// KindOfWire is the kind of a wire code, so that a client's error matches
// the kinds with errors.Is; busy tells ErrBusy from ErrConflict, which
// share CodeConflict. A code of no kind is ErrFailed.
func KindOfWire(code int, busy bool) error {
	if code == CodeConflict && busy {
		return ErrBusy
	}
	for _, k := range kinds {
		if k.wire == code && k.kind != ErrBusy {
			return k.kind
		}
	}
	return ErrFailed
}
