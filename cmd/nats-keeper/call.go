package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
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
func callVerb(ctx context.Context, f clientFlags, out output, verb string, req keeper.Request,
	human func(io.Writer, *keeper.Reply) error) error {
	req.Caller = f.Caller
	if err := verbs.CheckRequest(verb, req); err != nil {
		return jsonErr(f, out, err)
	}
	if err := verbs.CheckPrefix(f.Prefix); err != nil {
		return jsonErr(f, out, errorf(keeper.ErrBadRequest, "--prefix: %w, so nothing was done", err))
	}
	if f.Conn.Server == "" && f.Conn.Context == "" {
		f.Conn.Server = clientDefaultURL
	}
	nc, err := connect(ctx, f.Conn, "nats-keeper "+verb, slog.New(slog.NewTextHandler(out.Err, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		return jsonErr(f, out, fmt.Errorf("%w; is NATS running? `nats-keeper serve --embedded` starts one with the keeper", err))
	}
	defer nc.Close()
	c := verbs.NewClient(nc, verbs.WithPrefix(f.Prefix), verbs.WithTimeout(f.Timeout))
	if out.Progress && !f.JSON && req.Module != "" && req.Local != "" {
		bar := &progressLine{w: out.Err}
		stop, err := c.WatchProgress(req.Module, req.Local, bar.show)
		if err == nil {
			defer func() { stop(); bar.clear() }()
			_ = nc.Flush()
		}
	}
	rep, err := c.Do(ctx, verb, req)
	if err != nil {
		return jsonErr(f, out, err)
	}
	if f.JSON {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out.Out, "%s\n", b)
		if err != nil {
			return err
		}
		return verdict(rep)
	}
	if err := human(out.Out, rep); err != nil {
		return err
	}
	return verdict(rep)
}

// verdict turns a reply that reports a failed check into an error (exit 1).
func verdict(rep *keeper.Reply) error {
	if rep.Report != nil && !rep.Report.OK {
		return errorf(keeper.ErrFailed, "the restore point %s does not verify", rep.Report.Point)
	}
	return nil
}

func jsonErr(f clientFlags, out output, err error) error {
	if f.JSON {
		printJSONError(out.Out, err)
	}
	return err
}

// progressLine shows progress on one terminal line: step, streams, bytes, rate.
type progressLine struct {
	w     io.Writer
	mu    sync.Mutex
	step  string
	start time.Time
	shown bool
}

func (p *progressLine) show(pr keeper.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr.Step != p.step {
		p.step, p.start = pr.Step, time.Now()
	}
	rate := ""
	if d := time.Since(p.start).Seconds(); d > 0.2 && pr.Bytes > 0 {
		rate = ", " + humanBytes(int64(float64(pr.Bytes)/d)) + "/s"
	}
	fmt.Fprintf(p.w, "\r\033[K%s %s: stream %d of %d %s, %s%s", pr.Verb, pr.Step, min(pr.StreamsDone+1, max(pr.StreamsTotal, 1)),
		pr.StreamsTotal, pr.Stream, humanBytes(pr.Bytes), rate)
	p.shown = true
}

func (p *progressLine) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func humanBytes(n int64) string { return keeper.HumanBytes(n) }
