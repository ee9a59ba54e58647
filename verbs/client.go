package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/kept"
)

// DefaultTimeout is how long a Client waits for one reply. Restores of large
// kept data take minutes; set WithTimeout for more.
const DefaultTimeout = 10 * time.Minute

// MaxReply bounds the reply a Client accepts.
const MaxReply = 8 << 20

// Client sends requests to nats-keeper services. It is safe for concurrent use.
//
// A migration hook takes a restore point before it changes a module's data,
// and restores it if the change must be undone:
//
//	c := verbs.NewClient(nc)
//	req := kept.Request{Module: "billing", Local: "ledger", Form: 3,
//		Fingerprint: manifestHash, CatchUp: "ledger-migrate-3-to-4", Caller: "deploy"}
//	if _, err := c.SnapshotKept(ctx, req); err != nil {
//		return err // do not migrate without a restore point
//	}
//	if err := migrate(); err != nil {
//		req.Why = "migration to form 4 failed: " + err.Error()
//		rep, rerr := c.RestoreKept(ctx, req)
//		...  // rep.Aside.ID names the set-aside data; rep.CatchUp what to run next
//	}
//
// Errors: a failure reply is an *Error. errors.Is(err, kept.ErrBusy)
// means another verb holds the kept data (try again later; the reply's body
// says "busy": true), or (a 503 with Error.RetryAfter set) the keeper runs
// as many heavy verbs as it may: retry later; kept.ErrConflict matches
// every 409, busy or not (a conflict that is not busy, such as overlapping
// subjects, does not clear by waiting); kept.ErrNotFound that the point or kept data does not exist,
// kept.ErrBadRequest that the request was refused and nothing was done,
// kept.ErrDenied that the NATS server refused the connection's user the
// verb's subject, at once, so nothing was done (the Client chains the
// connection's error handler to hear it when it is made: set a handler of
// your own before NewClient, or chain the one you find with nc.ErrorHandler()).
// When no keeper answers (no responders, or no reply in time) the error wraps
// kept.ErrNoBus; after a timeout the verb may still be running.
//
// A keeper that dies mid-verb is found within seconds: the Client asks the
// keeper that takes its request for beats (BeatHeader) and, when they stop
// and the keeper does not answer its $SRV PING, follows the recovery for up
// to WithRecoveryWait (the restore's journal in the keeper's index, the
// verb's acts on <prefix>.acts.<verb>). If recovery finished the verb, the
// reply is the finishing act's, its Said beginning with what happened and
// its Aside the aside's id; if recovery undid it, an error of kind
// kept.ErrFailed that says so; if neither is known when the wait ends, an
// error of kind kept.ErrCutShort that says the verb was cut short and
// that recovery will finish or undo it. A keeper that sends no beats (an
// older one) is waited for as before, up to the timeout.
type Client struct {
	nc           *nats.Conn
	prefix       string
	timeout      time.Duration
	wait         time.Duration // WithNoResponderWait
	recoveryWait time.Duration // WithRecoveryWait
	denials      *denials
}

// NewClient returns a Client using nc. It takes WithPrefix and WithTimeout.
// It chains nc's error handler (see Client) to hear the server's permission
// refusals.
func NewClient(nc *nats.Conn, opts ...ClientOption) *Client {
	c := clientConfig{prefix: DefaultPrefix, timeout: DefaultTimeout}
	for _, o := range opts {
		o.applyClient(&c)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.recoveryWait <= 0 {
		c.recoveryWait = DefaultRecoveryWait
	}
	return &Client{nc: nc, prefix: c.prefix, timeout: c.timeout, wait: c.wait, recoveryWait: c.recoveryWait, denials: watchDenials(nc)}
}

// Prefix is the subject prefix the client sends to.
func (c *Client) Prefix() string { return c.prefix }

// SnapshotKept takes the restore point of r.Module's kept data r.Local at
// r.Form before r.Fingerprint.
func (c *Client) SnapshotKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbSnapshot, r)
}

// RestoreKept restores a point (or with r.AsideOnly only sets the live data
// aside; with r.DryRun only plans). r.Why is required.
func (c *Client) RestoreKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbRestore, r)
}

// DiscardAside removes the set-aside copy id (as list-kept names it:
// billing.ledger.20261130T103732Z); r.Why is required, r.Caller says who
// asks. On the wire the id travels in the request's from. An id of "" takes
// it from r.From, as callers before this parameter gave it; an id and a
// different r.From are refused, and nothing is sent.
func (c *Client) DiscardAside(ctx context.Context, id string, r kept.Request) (*kept.Reply, error) {
	switch {
	case id == "" && r.From == "":
		return nil, kept.Errorf(kept.ErrBadRequest, "discard-aside needs the id of the aside, so nothing was sent")
	case id != "" && r.From != "" && r.From != id:
		return nil, kept.Errorf(kept.ErrBadRequest, "discard-aside was given the aside %s and a request from %s; give one, so nothing was sent", id, r.From)
	case id != "":
		r.From = id
	}
	return c.Do(ctx, kept.VerbDiscard, r)
}

// DiscardPoint removes the restore point r.Module, r.Local, r.Form and
// r.Fingerprint name, on a person's call; r.Why is required.
func (c *Client) DiscardPoint(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbDiscardPoint, r)
}

// ListKept lists one page of points and asides, of r.Module (and r.Local)
// when given: at most r.Limit (the keeper's default when 0) after r.After.
// The reply's Next is the cursor of the next page ("" on the last), and its
// Total counts them all; ListAllKept follows the pages.
func (c *Client) ListKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbList, r)
}

// maxListPages bounds the pages ListAllKept follows.
const maxListPages = 100_000

// ListAllKept lists every point and aside, of r.Module (and r.Local) when
// given, following list-kept's pages (r.Limit points and asides each, the
// keeper's default when 0) from r.After, and joins them into one reply
// (kept.MergeList, with the captures). A listing that changes meanwhile is seen as each page
// found it.
func (c *Client) ListAllKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	var pages []*kept.Reply
	for range maxListPages {
		rep, err := c.ListKept(ctx, r)
		if err != nil {
			if len(pages) > 0 {
				return nil, fmt.Errorf("list-kept failed after %d page(s): %w", len(pages), err)
			}
			return nil, err
		}
		if rep.Cut != nil {
			return nil, fmt.Errorf("%w: list-kept page %d was cut to fit the max payload (%s), so the listing is not whole; ask with a smaller limit",
				kept.ErrFailed, len(pages)+1, rep.Cut.Where)
		}
		pages = append(pages, rep)
		if rep.Next == "" {
			return mergeList(r, pages), nil
		}
		if rep.Next <= r.After {
			return nil, fmt.Errorf("%w: list-kept answered page %d with the cursor %q, not after %q, so the listing stopped", kept.ErrFailed, len(pages), rep.Next, r.After)
		}
		r.After = rep.Next
	}
	return nil, fmt.Errorf("%w: list-kept gave more than %d pages, so the listing stopped", kept.ErrFailed, maxListPages)
}

// mergeList is kept.MergeList of the pages, with the captures the first
// page lists (MergeList leaves them out).
func mergeList(r kept.Request, pages []*kept.Reply) *kept.Reply {
	m := kept.MergeList(kept.ListOf(r), pages)
	if len(m.Captures) == 0 {
		for _, p := range pages {
			m.Captures = append(m.Captures, p.Captures...)
		}
	}
	return m
}

// PruneKept applies a retention policy to points (DryRun: says what it
// would keep and remove, and removes nothing).
func (c *Client) PruneKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbPrune, r)
}

// SetPlan records the plan of r.Module's kept data r.Local: r.Streams, the
// streams it is made of, and r.Consumers, the consumers that belong to it.
// The reply's KeptPlan is the plan recorded.
func (c *Client) SetPlan(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbSetPlan, r)
}

// ShowPlan returns the recorded plan of r.Module's kept data r.Local in the
// reply's KeptPlan; an error wrapping kept.ErrNotFound when there is none.
func (c *Client) ShowPlan(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbShowPlan, r)
}

// RemovePlan removes the plan of r.Module's kept data r.Local, so that the
// naming rule applies again.
func (c *Client) RemovePlan(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbRemovePlan, r)
}

// ShowEvidence returns the evidence report of a restore in the reply's
// Evidence: r.From is the aside id the restore made, or, for a restore into
// absent kept data, the point's directory (points/<module>/<local>/f<form>-<fingerprint>);
// an error wrapping kept.ErrNotFound when there is none.
func (c *Client) ShowEvidence(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbShowEvidence, r)
}

// VerifyKept re-checks one point's archive against its manifest.
func (c *Client) VerifyKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbVerify, r)
}

// DiffKept says what the live kept data r.Module/r.Local gained, lost and
// changed since the point r names (r.Form and r.Fingerprint, or r.From):
// per stream, per key or object, per consumer. The counts are whole; the
// names and sequences come in pages of at most r.Limit entries a list:
// ask again with r.After set to the reply's Next until it is empty.
func (c *Client) DiffKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbDiff, r)
}

// CaptureKept turns the capture of r.Module's kept data r.Local on
// (r.Capture "on", with r.Settings or the defaults) or off ("off"). The
// setting is recorded on the bus, where every keeper reads it, and the
// keeper that holds the kept data's capture lease writes its segments. The
// reply's Capture is the capture as it stands: its settings, the window a
// restore to a moment can reach, its lag, bytes, segments and bases.
func (c *Client) CaptureKept(ctx context.Context, r kept.Request) (*kept.Reply, error) {
	return c.Do(ctx, kept.VerbCapture, r)
}

// Do sends r to <prefix>.<verb> and decodes the reply.
func (c *Client) Do(ctx context.Context, verb string, r kept.Request) (*kept.Reply, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %s request could not be encoded, so nothing was sent: %v", kept.ErrBadRequest, verb, err)
	}
	subject := c.prefix + "." + verb
	ctx, cancelTimeout := context.WithTimeout(ctx, c.timeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	replies := replySubscription(c.nc)
	done := c.denials.wait(func(key, said string) {
		if strings.HasPrefix(key, "pub ") {
			cancel(kept.Errorf(kept.ErrDenied, "the NATS user may not publish to %s (the server said: %s), "+
				"so the request never reached a keeper and nothing was done; use a user allowed to publish there "+
				"(see Permissions in the README)", subject, said))
			return
		}
		cancel(kept.Errorf(kept.ErrDenied, "the NATS user may not subscribe to %s, where the replies to its requests "+
			"come (the server said: %s), so the reply to %s cannot arrive; the keeper may still have done the verb, "+
			"check with list-kept", replies, said, subject))
	}, "pub "+subject, "sub "+replies)
	defer done()
	msg, err := c.exchange(ctx, verb, subject, r, body)
	if s, ok := isSettled(err); ok {
		return s.rep, s.err
	}
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, kept.ErrDenied) {
			return nil, cause
		}
		return nil, noReply(subject, err)
	}
	return decodeReply(subject, msg)
}

// request sends msg, again while no one is subscribed to its subject, for
// up to c.wait.
func (c *Client) request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	giveUp := time.Now().Add(c.wait)
	pause := 100 * time.Millisecond
	for {
		reply, err := c.nc.RequestMsgWithContext(ctx, msg)
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().Add(pause).After(giveUp) {
			return reply, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

func noReply(subject string, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return kept.Errorf(kept.ErrNoBus, "the bus answered, but no nats-keeper answers on %s (none runs, or none serves this account or prefix), so nothing was done; start one with `nats-keeper serve`, or check the account and --prefix", subject)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%w: no reply on %s in time; the keeper may still be running the verb, check with list-kept: %v", kept.ErrNoBus, subject, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("the request on %s was cancelled before a reply came; the keeper may still be running it: %w", subject, err)
	}
	return fmt.Errorf("%w: the request on %s could not be sent or answered: %v", kept.ErrNoBus, subject, err)
}

func decodeReply(subject string, msg *nats.Msg) (*kept.Reply, error) {
	if len(msg.Data) > MaxReply {
		return nil, fmt.Errorf("%w: the reply on %s is %d bytes, more than the %d a client accepts", kept.ErrFailed, subject, len(msg.Data), MaxReply)
	}
	if codeText := msg.Header.Get(micro.ErrorCodeHeader); codeText != "" {
		code, err := strconv.Atoi(codeText)
		if err != nil {
			code = CodeFailed
		}
		said := msg.Header.Get(micro.ErrorHeader)
		var eb ErrorBody
		if json.Unmarshal(msg.Data, &eb) == nil && eb.Error != "" {
			said = eb.Error
		}
		if said == "" {
			said = fmt.Sprintf("the keeper answered %s with code %d and no sentence", subject, code)
		}
		e := &Error{Code: code, Said: said, Busy: code == CodeConflict && eb.Busy, Evidence: eb.Evidence}
		if secs, err := strconv.Atoi(msg.Header.Get(RetryAfterHeader)); err == nil && secs > 0 && secs <= 24*3600 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		return nil, e
	}
	var rep kept.Reply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return nil, fmt.Errorf("%w: the reply on %s is not a keeper reply: %v", kept.ErrFailed, subject, err)
	}
	return &rep, nil
}

// WatchProgress calls fn with each progress report of the verbs on module's
// kept data local until stop is called. fn runs on the subscription's
// goroutine.
func (c *Client) WatchProgress(module, local string, fn func(kept.Progress)) (stop func(), err error) {
	sub, err := c.nc.Subscribe(ProgressSubject(c.prefix, module, local), func(m *nats.Msg) {
		var p kept.Progress
		if len(m.Data) <= 64<<10 && json.Unmarshal(m.Data, &p) == nil {
			fn(p)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("could not watch progress on %s: %w", ProgressSubject(c.prefix, module, local), err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
