package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// output is where a client command writes: the reply to Out, progress (only
// when Progress is set, i.e. on an interactive terminal) to Err.
type output struct {
	Out, Err io.Writer
	Progress bool
}

// callVerb checks req, sends it to the keeper and prints the reply: JSON with
// --json, else human text through human.
func callVerb(ctx context.Context, f clientFlags, out output, verb string, req kept.Request,
	human func(io.Writer, *kept.Reply) error) error {
	do := func(c *verbs.Client, ctx context.Context, req kept.Request) (*kept.Reply, error) {
		return c.Do(ctx, verb, req)
	}
	return callClient(ctx, f, out, verb, req, do, human)
}

// callClient is callVerb with the client's call do (such as
// Client.ListAllKept, which follows pages).
func callClient(ctx context.Context, f clientFlags, out output, verb string, req kept.Request,
	do func(*verbs.Client, context.Context, kept.Request) (*kept.Reply, error), human func(io.Writer, *kept.Reply) error) error {
	req.Caller = f.Caller
	if err := verbs.CheckRequest(verb, req); err != nil {
		return jsonErr(f, out, err)
	}
	nc, err := connectClient(ctx, f, out, "nats-keeper "+verb)
	if err != nil {
		return jsonErr(f, out, err)
	}
	defer nc.Close()
	c := verbs.NewClient(nc, verbs.WithPrefix(f.Prefix), verbs.WithTimeout(f.Timeout), verbs.WithRecoveryWait(f.RecoveryWait))
	endProgress := func() {}
	if out.Progress && !f.JSON && req.Module != "" && req.Local != "" {
		bar := &progressLine{w: out.Err}
		stop, err := c.WatchProgress(req.Module, req.Local, bar.show)
		if err == nil {
			endProgress = func() { stop(); bar.clear() }
			_ = nc.Flush()
		}
	}
	rep, err := do(c, ctx, req)
	endProgress() // the line is cleared, and stays so, before the reply is printed
	if err != nil {
		return jsonErr(f, out, err)
	}
	if f.JSON {
		return printJSON(out.Out, rep)
	}
	// A point that does not verify is a failure reply, never a report.
	return human(out.Out, rep)
}

// connectClient checks --prefix and connects a client command to the bus
// (nats://127.0.0.1:4222 when no server or context is given), logging the
// connection's errors to out.Err.
func connectClient(ctx context.Context, f clientFlags, out output, name string) (*nats.Conn, error) {
	if err := verbs.CheckPrefix(f.Prefix); err != nil {
		return nil, kept.Errorf(kept.ErrBadRequest, "--prefix: %w, so nothing was done", err)
	}
	if f.Conn.Server == "" && f.Conn.Context == "" {
		f.Conn.Server = clientDefaultURL
	}
	nc, err := connect(ctx, f.Conn, name, slog.New(slog.NewTextHandler(out.Err, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil && errors.Is(err, kept.ErrNoBus) {
		return nil, fmt.Errorf("%w; is NATS running? `nats-keeper serve --embedded` starts one with the keeper", err)
	}
	return nc, err
}

func jsonErr(f clientFlags, out output, err error) error {
	if f.JSON {
		printJSONError(out.Out, err)
	}
	return err
}

// progressLine shows progress on one terminal line: step, streams, bytes
// (of how many, when known), rate and time left.
type progressLine struct {
	w       io.Writer
	mu      sync.Mutex
	step    string
	start   time.Time
	shown   bool
	cleared bool // for good: a report that comes after is not shown
}

func (p *progressLine) show(pr kept.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cleared {
		return
	}
	if pr.Step != p.step || p.start.IsZero() {
		p.step, p.start = pr.Step, time.Now()
	}
	fmt.Fprintf(p.w, "\r\033[K%s", progressText(pr, time.Since(p.start)))
	p.shown = true
}

// clear removes the line, if one was shown, and shows no more.
func (p *progressLine) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown && !p.cleared {
		fmt.Fprint(p.w, "\r\033[K")
	}
	p.cleared = true
}

// progressText is one report as a line, elapsed after its step began:
// "restore-kept restore: stream 2 of 3 billing_ledger, 120.0 MiB of 1.0 GiB
// (11%), 226.2 MiB/s, ETA 4s". What is not known is left out: the stream
// count when there is none, the stream when it has no name, the total, the
// percentage and the time left when BytesTotal is 0, the rate until the step
// has run a little.
func progressText(pr kept.Progress, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s:", pr.Verb, pr.Step)
	parts := []string{}
	stream := ""
	if pr.StreamsTotal > 0 {
		stream = fmt.Sprintf("stream %d of %d", min(pr.StreamsDone+1, pr.StreamsTotal), pr.StreamsTotal)
	}
	if pr.Stream != "" {
		stream = strings.TrimSpace(cmp.Or(stream, "stream") + " " + pr.Stream)
	}
	if stream != "" {
		parts = append(parts, stream)
	}
	if pr.BytesTotal > 0 {
		pct := min(pr.Bytes*100/pr.BytesTotal, 100)
		parts = append(parts, fmt.Sprintf("%s of %s (%d%%)", humanBytes(pr.Bytes), humanBytes(pr.BytesTotal), pct))
	} else {
		parts = append(parts, humanBytes(pr.Bytes))
	}
	if d := elapsed.Seconds(); d > 0.2 && pr.Bytes > 0 {
		rate := float64(pr.Bytes) / d
		parts = append(parts, humanBytes(int64(rate))+"/s")
		if left := pr.BytesTotal - pr.Bytes; pr.BytesTotal > 0 && left > 0 {
			eta := time.Duration(float64(left) / rate * float64(time.Second))
			parts = append(parts, "ETA "+max(eta.Round(time.Second), time.Second).String())
		}
	}
	b.WriteString(" ")
	b.WriteString(strings.Join(parts, ", "))
	return b.String()
}

func humanBytes(n int64) string { return kept.HumanBytes(n) }
