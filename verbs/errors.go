package verbs

import (
	"errors"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// Wire codes of a failure reply (the Nats-Service-Error-Code header and
// ErrorBody.Code): kept's, which maps them from the error's kind
// (kept.KindOf) in one table with the CLI's exit codes.
const (
	CodeBadRequest = kept.CodeBadRequest // kept.ErrBadRequest: refused, nothing was done
	CodeNotFound   = kept.CodeNotFound   // kept.ErrNotFound
	CodeConflict   = kept.CodeConflict   // kept.ErrConflict, and kept.ErrBusy (ErrorBody.Busy)
	CodeFailed     = kept.CodeFailed     // kept.ErrFailed, and an error of no kind
	CodeNoBus      = kept.CodeNoBus      // kept.ErrNoBus: the keeper is stopping, or could not reach the bus
	CodeLocked     = kept.CodeLocked     // kept.ErrLocked
	CodeDenied     = kept.CodeDenied     // kept.ErrDenied: never sent by a keeper (see kept.CodeDenied)
	CodeCutShort   = kept.CodeCutShort   // kept.ErrCutShort: never sent by a keeper (see kept.CodeCutShort)
)

// Code is the wire code for err: 200 for nil, else the code of its kind
// (kept.WireCode), 500 for an error of no kind.
func Code(err error) int { return kept.WireCode(err) }

// ErrorBody is the JSON body of a failure reply.
type ErrorBody struct {
	Error string `json:"error"` // the sentence, as in the Nats-Service-Error header
	Code  int    `json:"code"`  // the wire code, as in the Nats-Service-Error-Code header
	// Busy is set on a 409 when another verb holds the kept data
	// (kept.ErrBusy): trying again later may succeed. A 409 without it is
	// a conflict that waiting does not clear.
	Busy bool `json:"busy,omitempty"`
	// Evidence is the evidence report of a restore-kept that was done but
	// whose evidence fails (kept.EvidenceError, code 500): the data is
	// left as the restore made it.
	Evidence *kept.Evidence `json:"evidence,omitempty"`
}

// bodyOf is the failure reply's body for err.
func bodyOf(err error) ErrorBody {
	eb := ErrorBody{Error: err.Error(), Code: Code(err), Busy: errors.Is(err, kept.ErrBusy)}
	var ee *kept.EvidenceError
	if errors.As(err, &ee) {
		eb.Evidence = ee.Evidence
	}
	return eb
}

// Error is a failure reply from the keeper, as a Client returns it.
// errors.Is(err, kept.ErrNotFound), kept.ErrBadRequest, kept.ErrBusy,
// kept.ErrConflict (which a busy reply matches too), kept.ErrFailed and
// kept.ErrNoBus work on it through Unwrap.
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
	Evidence *kept.Evidence
}

// Error is the keeper's sentence.
func (e *Error) Error() string { return e.Said }

// Unwrap returns the keeper's sentinel for Code (and Busy), and
// kept.ErrBusy too when the keeper asked to retry later.
func (e *Error) Unwrap() []error {
	if e.RetryAfter > 0 {
		return []error{kept.KindOfWire(e.Code, e.Busy), kept.ErrBusy}
	}
	return []error{kept.KindOfWire(e.Code, e.Busy)}
}
