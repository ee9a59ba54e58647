package verbs

import (
	"errors"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// Wire codes of a failure reply (the Nats-Service-Error-Code header and
// ErrorBody.Code). They are mapped from the error's kind (keeper.KindOf)
// here, and nowhere else.
const (
	CodeBadRequest = 400 // keeper.ErrBadRequest: refused, nothing was done
	CodeNotFound   = 404 // keeper.ErrNotFound
	CodeConflict   = 409 // keeper.ErrConflict, and keeper.ErrBusy (ErrorBody.Busy)
	CodeFailed     = 500 // keeper.ErrFailed, and an error of no kind
	CodeNoBus      = 503 // keeper.ErrNoBus: the keeper is stopping, or could not reach the bus
	CodeLocked     = 423 // keeper.ErrLocked: the archive is encrypted and the keeper holds no identity that decrypts it
	// CodeDenied is never sent by a keeper: the client gives it to a request
	// the NATS server refused before it reached one (keeper.ErrDenied).
	CodeDenied = 403
	// CodeCutShort is never sent by a keeper: the client gives it to a
	// verb whose keeper stopped answering before it replied, when no
	// outcome was known (keeper.ErrCutShort).
	CodeCutShort = 504
)

// Code is the wire code for err: 200 for nil, else the code of its kind
// (keeper.KindOf), 500 for an error of no kind.
func Code(err error) int {
	if err == nil {
		return 200
	}
	switch keeper.KindOf(err) {
	case keeper.ErrBadRequest:
		return CodeBadRequest
	case keeper.ErrNotFound:
		return CodeNotFound
	case keeper.ErrBusy, keeper.ErrConflict:
		return CodeConflict
	case keeper.ErrNoBus:
		return CodeNoBus
	case keeper.ErrDenied:
		return CodeDenied
	case keeper.ErrLocked:
		return CodeLocked
	case keeper.ErrCutShort:
		return CodeCutShort
	default:
		return CodeFailed
	}
}

// kindOfCode is the kind of a wire code, so that a client's Error matches
// the keeper's sentinels with errors.Is; busy tells keeper.ErrBusy from
// keeper.ErrConflict, which share 409.
func kindOfCode(code int, busy bool) error {
	switch code {
	case CodeBadRequest:
		return keeper.ErrBadRequest
	case CodeNotFound:
		return keeper.ErrNotFound
	case CodeConflict:
		if busy {
			return keeper.ErrBusy
		}
		return keeper.ErrConflict
	case CodeNoBus:
		return keeper.ErrNoBus
	case CodeDenied:
		return keeper.ErrDenied
	case CodeLocked:
		return keeper.ErrLocked
	case CodeCutShort:
		return keeper.ErrCutShort
	default:
		return keeper.ErrFailed
	}
}

// ErrorBody is the JSON body of a failure reply.
type ErrorBody struct {
	Error string `json:"error"` // the sentence, as in the Nats-Service-Error header
	Code  int    `json:"code"`  // the wire code, as in the Nats-Service-Error-Code header
	// Busy is set on a 409 when another verb holds the kept data
	// (keeper.ErrBusy): trying again later may succeed. A 409 without it is
	// a conflict that waiting does not clear.
	Busy bool `json:"busy,omitempty"`
	// Evidence is the evidence report of a restore-kept that was done but
	// whose evidence fails (keeper.EvidenceError, code 500): the data is
	// left as the restore made it.
	Evidence *keeper.Evidence `json:"evidence,omitempty"`
}

// bodyOf is the failure reply's body for err.
func bodyOf(err error) ErrorBody {
	eb := ErrorBody{Error: err.Error(), Code: Code(err), Busy: errors.Is(err, keeper.ErrBusy)}
	var ee *keeper.EvidenceError
	if errors.As(err, &ee) {
		eb.Evidence = ee.Evidence
	}
	return eb
}

// Error is a failure reply from the keeper, as a Client returns it.
// errors.Is(err, keeper.ErrNotFound), keeper.ErrBadRequest, keeper.ErrBusy,
// keeper.ErrConflict (which a busy reply matches too), keeper.ErrFailed and
// keeper.ErrNoBus work on it through Unwrap.
type Error struct {
	Code int    // the wire code: 400, 404, 409, 423, 500, 503
	Said string // the keeper's sentence: what happened and what did not
	Busy bool   // a 409 because another verb holds the kept data (ErrorBody.Busy)
	// RetryAfter, when not 0, is how long the keeper asked the caller to
	// wait before trying again (its Retry-After header): it refused a heavy
	// verb because it runs as many as it may.
	RetryAfter time.Duration
	// Evidence is the evidence report a failed restore-kept carried
	// (ErrorBody.Evidence), or nil.
	Evidence *keeper.Evidence
}

// Error is the keeper's sentence.
func (e *Error) Error() string { return e.Said }

// Unwrap returns the keeper's sentinel for Code (and Busy), and
// keeper.ErrBusy too when the keeper asked to retry later.
func (e *Error) Unwrap() []error {
	if e.RetryAfter > 0 {
		return []error{kindOfCode(e.Code, e.Busy), keeper.ErrBusy}
	}
	return []error{kindOfCode(e.Code, e.Busy)}
}
