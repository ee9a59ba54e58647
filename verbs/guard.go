package verbs

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nats-keeper/nats-keeper/kept"
)

// GuardRequest names the restore point Guard takes before the guarded
// change, and says what it does when the change is cut short.
type GuardRequest struct {
	Module      string // the module whose kept data the change touches
	Local       string // the kept data
	Form        int    // the kept data's form now, before the change
	Fingerprint string // the change the point protects against
	CatchUp     string // optional: the tool that brings data at Form up to the next form
	// KeepFor, when set, protects the point from prune-kept for that long.
	KeepFor kept.Duration
	Caller  string // who asks, recorded with the snapshot and the restore
	// NoRestoreOnCancel leaves the point unrestored when the change fails
	// after ctx was cancelled (for the CLI: after a SIGINT or SIGTERM), for
	// whoever cancelled it to decide; the point stays for restore-kept.
	NoRestoreOnCancel bool
	// Method and Downstream are the restore's, when the change fails
	// (kept.Request's): how each stream is rolled back ("" is auto), and
	// "leave" to restore whole a stream others mirror or source.
	Method     string
	Downstream string
	// At, when set (RFC 3339), is the moment the restore brings the kept
	// data back to when the change fails, from its capture, instead of
	// the point Guard took (which it still takes). It must be in the
	// captured window when the restore runs.
	At string
}

// GuardResult is what Guard did: the point it took, how the change ended,
// and the restore's outcome when it restored.
type GuardResult struct {
	Said      string      `json:"said"`                // one sentence a person can read: what happened and what did not
	Point     *kept.Point `json:"point,omitempty"`     // the restore point taken; nil when the snapshot failed
	Ran       bool        `json:"ran"`                 // the change was started (never without a point)
	Failed    string      `json:"failed,omitempty"`    // the change's error, when it failed
	Cancelled bool        `json:"cancelled,omitempty"` // ctx was done when the change failed
	// Restored is the restore-kept reply when Guard restored the point.
	Restored *kept.Reply `json:"restored,omitempty"`
	// RestoreError is the restore's failure, when it was tried and failed.
	RestoreError string `json:"restore-error,omitempty" was:"restore_error"`
	Aside        string `json:"aside,omitempty"`    // where the restore set the live data aside
	CatchUp      string `json:"catch-up,omitempty"` // the tool to run next, from the restore
}

// GuardError is Guard's error when the guarded change failed: the change's
// error and, when restoring the point failed too, the restore's. errors.Is
// and errors.As see both.
type GuardError struct {
	Said    string // the result's sentence
	Err     error  // the change's error (a panic is reported as one)
	Restore error  // the restore's error; nil when it restored or was not tried
}

func (e *GuardError) Error() string { return e.Said }

// Unwrap returns the change's error and the restore's, when there is one.
func (e *GuardError) Unwrap() []error {
	if e.Restore == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Restore}
}

type guardPointKey struct{}

// GuardPoint is the restore point Guard took before it called the guarded
// function with ctx; nil outside Guard.
func GuardPoint(ctx context.Context) *kept.Point {
	p, _ := ctx.Value(guardPointKey{}).(*kept.Point)
	return p
}

// Guard wraps a change of one kept data (a migration) in a restore point.
// It takes the point with snapshot-kept; only when that succeeds does it
// call change, with a ctx that carries the point (GuardPoint). When change
// returns nil the point is left as it is and Guard returns no error. When
// change fails or panics, Guard restores the point with restore-kept, why
// "guard: <the change's error>", so the live data the change left is set
// aside (never deleted) and the data is back as it was at the point (with
// req.At, as it was at that moment, from its capture); the
// result names the aside and the catch-up tool. The restore runs even when
// ctx was cancelled (a signal, say), unless req.NoRestoreOnCancel; it is
// bounded by the client's timeout. A panic is re-raised after the restore.
//
// The error is nil when the change succeeded; the snapshot's error (the
// change never ran) when there is no point; else a *GuardError wrapping the
// change's error and, if restoring failed too, the restore's.
func (c *Client) Guard(ctx context.Context, req GuardRequest, change func(ctx context.Context) error) (GuardResult, error) {
	snap := kept.Request{Module: req.Module, Local: req.Local, Form: req.Form, Fingerprint: req.Fingerprint,
		CatchUp: req.CatchUp, KeepFor: req.KeepFor, Caller: req.Caller}
	what := fmt.Sprintf("%s/%s form %d before %s", req.Module, req.Local, req.Form, req.Fingerprint)
	if change == nil {
		err := fmt.Errorf("%w: guard was given no change to run, so no point was taken and nothing was done", kept.ErrBadRequest)
		return GuardResult{Said: err.Error()}, err
	}
	if err := CheckRequest(kept.VerbSnapshot, snap); err != nil {
		return GuardResult{Said: "guard: " + err.Error()}, err
	}
	// The restore's method is checked now: a wrong one would only be
	// found once the change failed.
	if err := CheckRequest(kept.VerbRestore, guardRestore(req, "guard")); err != nil {
		err = fmt.Errorf("guard: %w, so no point was taken and nothing was done", err)
		return GuardResult{Said: err.Error()}, err
	}
	rep, err := c.SnapshotKept(ctx, snap)
	if err == nil && rep.Point == nil {
		err = fmt.Errorf("%w: the keeper's snapshot-kept reply names no restore point", kept.ErrFailed)
	}
	if err != nil {
		err = fmt.Errorf("guard: no restore point of %s was taken, so the change did not run: %w", what, err)
		return GuardResult{Said: err.Error()}, err
	}
	res := GuardResult{Point: rep.Point, Ran: true}
	panicked, failure := runChange(context.WithValue(ctx, guardPointKey{}, rep.Point), change)
	if failure == nil {
		res.Said = fmt.Sprintf("guard: took the restore point of %s; the change succeeded, so the point was not restored (it stays, for restore-kept)", what)
		return res, nil
	}
	res.Failed = failure.Error()
	res.Cancelled = ctx.Err() != nil
	gerr := &GuardError{Err: failure}
	restoreBy := fmt.Sprintf("nats-keeper restore-kept %s %s --form %d --before %s --why ...", req.Module, req.Local, req.Form, req.Fingerprint)
	restoring, restored := "the point", "the restore point was restored"
	if req.At != "" {
		restoreBy = fmt.Sprintf("nats-keeper restore-kept %s %s --at %s --why ...", req.Module, req.Local, req.At)
		restoring, restored = "to the moment "+req.At, "the kept data was restored to the moment "+req.At
	}
	switch {
	case res.Cancelled && req.NoRestoreOnCancel:
		res.Said = fmt.Sprintf("guard: the change of %s failed (%s) after it was cancelled, and the point was not restored, as asked; "+
			"the live data is as the change left it; restore it with: %s", what, res.Failed, restoreBy)
	default:
		rr := guardRestore(req, guardWhy(failure))
		rr.Caller = req.Caller
		rrep, rerr := c.RestoreKept(context.WithoutCancel(ctx), rr)
		switch {
		case rerr != nil:
			gerr.Restore = rerr
			res.RestoreError = rerr.Error()
			res.Said = fmt.Sprintf("guard: the change of %s failed (%s), and restoring %s failed too: %s; "+
				"restore it with: %s", what, res.Failed, restoring, rerr, restoreBy)
		default:
			res.Restored = rrep
			res.CatchUp = rrep.CatchUp
			aside := "nothing was live to set aside"
			if rrep.Aside != nil {
				res.Aside = rrep.Aside.ID
				aside = "the live data the change left was set aside as " + rrep.Aside.ID
			}
			res.Said = fmt.Sprintf("guard: the change of %s failed (%s), so %s; %s", what, res.Failed, restored, aside)
			if res.CatchUp != "" {
				res.Said += "; run " + res.CatchUp + " next"
			}
		}
	}
	gerr.Said = res.Said
	if panicked != nil {
		panic(panicked)
	}
	return res, gerr
}

// guardRestore is the restore-kept request of a failed change: of the
// point Guard took, or of the moment req.At.
func guardRestore(req GuardRequest, why string) kept.Request {
	r := kept.Request{Module: req.Module, Local: req.Local, Form: req.Form, Fingerprint: req.Fingerprint,
		Why: why, Method: req.Method, Downstream: req.Downstream}
	if req.At != "" {
		r.Form, r.Fingerprint, r.At = 0, "", req.At
	}
	return r
}

// runChange calls change, turning a panic into an error (and returning the
// panic's value, to re-raise once the point is restored).
func runChange(ctx context.Context, change func(context.Context) error) (panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
			err = fmt.Errorf("panicked: %v", p)
		}
	}()
	return nil, change(ctx)
}

// guardWhy is the restore's why: "guard: " and the change's error, bounded
// and without NUL bytes, so the request is never refused for its why.
func guardWhy(err error) string {
	why := "guard: " + strings.ReplaceAll(err.Error(), "\x00", "")
	if len(why) <= kept.MaxTextLen {
		return why
	}
	cut := kept.MaxTextLen - len("…")
	for cut > 0 && !utf8.RuneStart(why[cut]) {
		cut--
	}
	return why[:cut] + "…"
}
