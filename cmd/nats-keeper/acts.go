package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/kept"
)

type actsOptions struct {
	Client clientFlags
	Out    output
	Module string
	Local  string
	Since  string // a duration back from now (24h) or a time (RFC 3339, or a UTC date)
	Now    func() time.Time
}

func newActsCmd(e env) *cobra.Command {
	o := &actsOptions{Out: output{Out: e.Out, Err: e.Err}, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "acts [MODULE [LOCAL]]",
		Short: "Read the trail of acts back: what the keeper did, who asked and why",
		Long: `Read the keeper's acts from its acts stream (KEEPER_ACTS for the default
prefix), oldest first: one line per act, or with --json one JSON object per
line (JSON Lines). It reads the stream itself, with an ordered consumer, so it
works while no keeper runs; the NATS user needs read access to that stream
(see Permissions in the README). An act id seen twice is shown once.`,
		Args: args(0, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			optionalKept(a, &o.Module, &o.Local)
			return ran(runActs(cmd.Context(), *o))
		},
	}
	addClientFlags(cmd.Flags(), &o.Client, e)
	addDomainFlag(cmd.Flags(), &o.Client.Conn)
	cmd.Flags().StringVar(&o.Since, "since", "", "only acts stored since then: a duration back from now (24h, 90m) or a time (2026-12-01T18:00:00Z, or a UTC date 2026-12-01)")
	return cmd
}

// parseSince reads --since: "" (every act), a duration back from now, an
// RFC 3339 time, or a date (UTC midnight).
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, kept.Errorf(kept.ErrBadRequest, "--since %s is not a duration above 0, so no act was read", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, kept.Errorf(kept.ErrBadRequest, "--since %q is neither a duration (24h) nor a time (2026-12-01T18:00:00Z or 2026-12-01), so no act was read", s)
}

// actLine is one act as --json prints it: the act's own fields and its
// sequence and time in the acts stream; a message that is not an act has
// only those and "bad", why.
type actLine struct {
	Seq    uint64    `json:"seq"`
	Stored time.Time `json:"stored"`
	Bad    string    `json:"bad,omitempty"`
	Raw    string    `json:"raw,omitempty"` // a message that is no act: its first bytes
	*kept.Act
}

func runActs(ctx context.Context, o actsOptions) error {
	for _, n := range []struct{ what, v string }{{"module", o.Module}, {"kept data", o.Local}} {
		if n.v != "" {
			if err := kept.ValidName(n.what, n.v); err != nil {
				return jsonErr(o.Client, o.Out, fmt.Errorf("%w, so no act was read", err))
			}
		}
	}
	since, err := parseSince(o.Since, o.Now())
	if err != nil {
		return jsonErr(o.Client, o.Out, err)
	}
	domain, err := o.Client.Conn.domain()
	if err != nil {
		return jsonErr(o.Client, o.Out, err)
	}
	nc, err := connectClient(ctx, o.Client, o.Out, "nats-keeper acts")
	if err != nil {
		return jsonErr(o.Client, o.Out, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, o.Client.Timeout)
	defer cancel()
	seen := map[string]bool{}
	shown := 0
	err = jsbus.ReadActsIn(ctx, nc, domain, o.Client.Prefix, since, func(sa jsbus.StoredAct) error {
		if sa.Bad == nil {
			if (o.Module != "" && sa.Act.Module != o.Module) || (o.Local != "" && sa.Act.Local != o.Local) {
				return nil
			}
			if sa.Act.ID != "" && seen[sa.Act.ID] {
				return nil // a replay stored outside the duplicate window
			}
			seen[sa.Act.ID] = true
		} else if o.Module != "" {
			return nil
		}
		shown++
		if o.Client.JSON {
			return printActJSON(o.Out.Out, sa)
		}
		return printAct(o.Out.Out, sa)
	})
	if err != nil {
		return jsonErr(o.Client, o.Out, err)
	}
	if shown == 0 && !o.Client.JSON {
		_, err = fmt.Fprintln(o.Out.Out, "No acts.")
	}
	return err
}

func printActJSON(w io.Writer, sa jsbus.StoredAct) error {
	l := actLine{Seq: sa.Seq, Stored: sa.Time.UTC()}
	if sa.Bad != nil {
		l.Bad, l.Raw = sa.Bad.Error(), string(sa.Raw)
	} else {
		l.Act = &sa.Act
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printAct writes one line: time, verb, module/local, outcome, caller,
// what, and why. Every field is outside input (anyone allowed to publish
// to the acts subjects may have put it there), so control characters are
// shown escaped, never sent to the terminal.
func printAct(w io.Writer, sa jsbus.StoredAct) error {
	if sa.Bad != nil {
		_, err := fmt.Fprintf(w, "%s  #%d is not an act (%s): %s\n", sa.Time.UTC().Format(time.RFC3339), sa.Seq, clean(sa.Bad.Error()), clean(string(sa.Raw)))
		return err
	}
	a := sa.Act
	at := a.Time
	if at.IsZero() {
		at = sa.Time
	}
	what := "-"
	if a.Module != "" {
		what = a.Module
		if a.Local != "" {
			what += "/" + a.Local
		}
	}
	caller := a.Caller
	if caller == "" {
		caller = "-"
	}
	if a.Hand {
		caller += " (by hand)"
	}
	line := fmt.Sprintf("%s  %s  %s  %s  %s  %s", at.UTC().Format(time.RFC3339), clean(a.Verb), clean(what), clean(a.Outcome), clean(caller), clean(a.What))
	if a.Why != "" {
		line += "  why: " + clean(a.Why)
	}
	if a.BusIdentity != nil {
		// The caller column is what the request claimed; this is who the
		// bus says asked.
		line += "  bus says: " + clean(a.BusIdentity.String())
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// clean is s with every non-printable character escaped as Go would quote
// it.
func clean(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}
