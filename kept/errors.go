package kept

import (
	"errors"
	"fmt"
)

// The kinds of error. Every error a verb returns carries exactly one of
// these, for errors.Is; KindOf says which. The wire codes (package verbs)
// and the CLI's exit codes (cmd/nats-keeper) are mapped from the kind, each
// in that one place, outside the domain.
var (
	// ErrBadRequest: the request was refused as it stands, and nothing was
	// done.
	ErrBadRequest = errors.New("bad request")
	// ErrNotFound: the point, aside, plan or kept data does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the bus or the store is not as the verb needs it (a
	// stream in the way, subjects that overlap, another store's index), so
	// the verb was refused or stopped; it does not go away by waiting.
	ErrConflict = errors.New("conflict")
	// ErrBusy: another verb, on this keeper or another, holds the kept data
	// or one of its streams; try again once it is done. It is a kind of
	// conflict: errors.Is(err, ErrConflict) holds for it too.
	ErrBusy = fmt.Errorf("busy, a kind of %w", ErrConflict)
	// ErrFailed: the verb failed part-way; its sentence says what was and
	// was not done.
	ErrFailed = errors.New("failed")
	// ErrStaleStream: the server refused a stream's restore because the
	// stream's store still held messages of one removed just before (its
	// files not yet gone from the server's disk). Removed again a little
	// later, the restore passes. It is a kind of failure.
	ErrStaleStream = fmt.Errorf("the server still held files of a stream removed just before, a kind of %w", ErrFailed)
	// ErrNoBus: no bus (or no keeper) could be reached, or the keeper is
	// stopping.
	ErrNoBus = errors.New("no bus reachable")
	// ErrDenied: the NATS server refused the caller's user the subject of the
	// request, so it never reached a keeper.
	ErrDenied = errors.New("denied by the server's permissions")
	// ErrLocked: the archive is encrypted and this keeper holds no identity
	// that decrypts it (serve --identity), so it was neither restored nor
	// fully verified, and nothing was touched.
	ErrLocked = errors.New("encrypted, and no identity here decrypts it")
	// ErrCutShort: the keeper that ran the verb stopped answering (it died,
	// or lost the bus) before it replied, and no outcome was known when the
	// caller stopped waiting: recovery finishes or undoes what it left. A
	// client gives it; a keeper never answers with it.
	ErrCutShort = errors.New("cut short: the keeper that ran the verb stopped answering")
)

// kindError is a sentence of one kind, without the kind's words in its
// text: the one kinded error type of nats-keeper.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// Errorf formats a sentence, as fmt.Errorf does (%w allowed), that
// errors.Is matches to kind (one of the kinds above) as well as to what it
// wraps. The kind's own words are not added to the sentence.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}

// AsKind marks err as kind, whatever kind it carries already: errors.Is
// matches it to kind first. A nil err stays nil.
func AsKind(kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, err: err}
}

// WithKind marks err as kind unless it already carries a kind (KindOf is not
// nil). A nil err stays nil.
func WithKind(kind, err error) error {
	if err == nil || KindOf(err) != nil {
		return err
	}
	return &kindError{kind: kind, err: err}
}
