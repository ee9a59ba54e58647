package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

type captureOptions struct {
	Client       clientFlags
	Out          output
	Module       string
	Local        string
	On           bool
	Off          bool
	SegmentEvery kept.Duration
	SegmentBytes sizeFlag
	BaseEvery    kept.Duration
	Window       kept.Duration
	Form         int
	Why          string
}

func newCaptureCmd(e env) *cobra.Command {
	o := &captureOptions{Out: output{Out: e.Out, Err: e.Err}}
	cmd := &cobra.Command{
		Use:   "capture MODULE LOCAL --on | --off [--segment-every D] [--segment-bytes N] [--base-every D] [--window D] [--form N] [--why TEXT]",
		Short: "Capture a kept data continuously, so it restores to any moment of a window, or stop",
		Long: `Turn the capture of one kept data on or off. With capture on, the keeper that holds
the kept data's capture lease follows its streams and writes what they gain to the store
as immutable segments, after a base (a full point); restore-kept --at or --at-seq then
brings the kept data back as it was at any moment of the captured window. The setting is
recorded on the bus, so every keeper of the bus applies it, and another keeper takes the
capture up when its keeper dies.

A segment is closed after --segment-every of data or --segment-bytes, whichever comes first
(default 1s or 8MiB); a new base is taken every --base-every (default 1d); the window is
kept for --window (default 1w). --off stops writing segments; those kept stay until their
window passes. list shows each capture: its window, lag, bytes, segments and bases.`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Module, o.Local = a[0], a[1]
			return ran(runCapture(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addClientFlags(f, &o.Client, e)
	f.BoolVar(&o.On, "on", false, "turn capture on")
	f.BoolVar(&o.Off, "off", false, "turn capture off")
	f.Var(&o.SegmentEvery, "segment-every", fmt.Sprintf("close a segment after this much time of data (%s to %s; default %s)", kept.MinSegmentEvery, kept.MaxSegmentEvery, kept.DefaultSegmentEvery))
	f.Var(&o.SegmentBytes, "segment-bytes", fmt.Sprintf("or after this many bytes, whichever comes first (%s to %s; default %s)",
		formatSize(kept.MinSegmentBytes), formatSize(kept.MaxSegmentBytes), formatSize(kept.DefaultSegmentBytes)))
	f.Var(&o.BaseEvery, "base-every", fmt.Sprintf("take a new base (a full point) this often (at least %s; default %s)", kept.MinBaseEvery, kept.DefaultBaseEvery))
	f.Var(&o.Window, "window", fmt.Sprintf("how far back a restore to a moment can go (at least %s; default %s)", kept.MinWindow, kept.DefaultWindow))
	f.IntVar(&o.Form, "form", 0, "the form of the kept data, which its bases are taken at")
	f.StringVar(&o.Why, "why", "", "why capture is turned on or off, recorded with the act")
	return cmd
}

func runCapture(ctx context.Context, o captureOptions) error {
	switch {
	case o.On == o.Off && o.On:
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "capture takes --on or --off, not both, so nothing was done"))
	case o.On == o.Off:
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "capture needs --on or --off, so nothing was done"))
	}
	settings := kept.CaptureSettings{SegmentEvery: o.SegmentEvery, SegmentBytes: int64(o.SegmentBytes), BaseEvery: o.BaseEvery, Window: o.Window}
	req := kept.Request{Module: o.Module, Local: o.Local, Capture: "on", Form: o.Form, Why: o.Why}
	if o.Off {
		req.Capture = "off"
		if settings != (kept.CaptureSettings{}) {
			return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest,
				"capture --off takes no --segment-every, --segment-bytes, --base-every or --window (they are --on's), so nothing was done"))
		}
	} else if settings != (kept.CaptureSettings{}) {
		req.Settings = &settings
	}
	return callVerb(ctx, o.Client, o.Out, kept.VerbCapture, req, printCapture)
}

// printCapture prints capture-kept's reply: its sentence and the capture
// as it stands.
func printCapture(w io.Writer, rep *kept.Reply) error {
	fmt.Fprintln(w, rep.Said)
	if c := rep.Capture; c != nil {
		s := c.Settings
		fmt.Fprintf(w, "  capture:   %s, a segment every %s or %s, a new base every %s, a window of %s\n",
			onOff(c.On), s.SegmentEvery, humanBytes(s.SegmentBytes), s.BaseEvery, s.Window)
		if c.From == nil || c.To == nil {
			fmt.Fprintln(w, "  window:    nothing captured yet (the capturing keeper takes a base first)")
		} else {
			fmt.Fprintf(w, "  window:    %s to %s (restore-kept --at takes a moment in it)\n", momentText(*c.From), momentText(*c.To))
			if c.On {
				fmt.Fprintf(w, "  lag:       %s (how far the window's end is behind now)\n", msText(c.LagMS))
			}
		}
		fmt.Fprintf(w, "  held:      %s in %d segment(s) of %d base(s)\n", humanBytes(c.Bytes), c.Segments, c.Bases)
	}
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// momentText is a moment of a captured window as restore-kept --at takes
// it: RFC 3339 in UTC, to the millisecond (a window begins when its base
// was taken, which a whole second would miss).
func momentText(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// msText is a span in milliseconds (a capture's lag, a positions
// sample's age), for a person: milliseconds under a second, tenths of a
// second under a minute, else as an age.
func msText(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return keeper.HumanAge(d)
}
