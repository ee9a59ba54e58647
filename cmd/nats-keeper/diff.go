package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
)

type diffOptions struct {
	Client clientFlags
	Out    output
	Module string
	Local  string
	Form   int
	Before string
	From   string
	Limit  int
	After  string
}

func newDiffCmd(e env) *cobra.Command {
	o := &diffOptions{Out: output{Out: e.Out, Err: e.Err, Progress: e.Terminal}}
	cmd := &cobra.Command{
		Use:   "diff MODULE LOCAL (--form N --before FINGERPRINT | --from DIR)",
		Short: "Say what the live kept data gained, lost and changed since a restore point",
		Long: `Say what the live kept data gained, lost and changed since a restore point: per stream its
state then and now, the messages appended after the point and the point's messages no longer
live, the configuration fields changed, a KV bucket's keys and an object store's objects added (+),
changed (~) and deleted (-); and each of the module's consumers, its position then and now.
Nothing is changed. The counts are whole; the names and sequences come in pages of at most
--limit a list: the reply says the cursor to ask again with (--after).`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Module, o.Local = a[0], a[1]
			return ran(runDiff(cmd.Context(), *o))
		},
	}
	addClientFlags(cmd.Flags(), &o.Client, e)
	addPointOrFromFlags(cmd, &o.Form, &o.Before, &o.From)
	f := cmd.Flags()
	f.IntVar(&o.Limit, "limit", 0, fmt.Sprintf("at most this many names or sequence ranges a list (default %d, at most %d)", kept.DefaultDiffLimit, kept.MaxDiffLimit))
	f.StringVar(&o.After, "after", "", "the cursor a diff gave (its next): the page after it")
	return cmd
}

func runDiff(ctx context.Context, o diffOptions) error {
	req := kept.Request{Module: o.Module, Local: o.Local, Form: o.Form, Fingerprint: o.Before, From: o.From, Limit: o.Limit, After: o.After}
	return callVerb(ctx, o.Client, o.Out, kept.VerbDiff, req, printDiff)
}

// addPointOrFromFlags adds --form and --before, the restore point a command
// names, or --from, its directory (or aside/<id>): one of the two ways.
func addPointOrFromFlags(cmd *cobra.Command, form *int, before, from *string) {
	f := cmd.Flags()
	f.IntVar(form, "form", 0, "the form of the restore point")
	f.StringVar(before, "before", "", "the fingerprint of the restore point")
	f.StringVar(from, "from", "", "the restore point's directory (points/<module>/<local>/f<form>-<fingerprint>), or aside/<id>")
	cmd.MarkFlagsOneRequired("before", "from")
	cmd.MarkFlagsMutuallyExclusive("before", "from")
	cmd.MarkFlagsMutuallyExclusive("form", "from")
}

// printDiff prints a diff: its sentence, a table of the streams, the
// names and sequences of each, and the consumers.
func printDiff(w io.Writer, rep *kept.Reply) error {
	fmt.Fprintln(w, rep.Said)
	if len(rep.Streams) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  STREAM\tKIND\tTHEN\tNOW\tAPPENDED\tREMOVED\tKEYS +/~/-\tCONFIG CHANGED")
		for _, s := range rep.Streams {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Stream, dash(s.Kind), seqState(s.Then), seqState(s.Now),
				kept.Thousands(s.Appended), kept.Thousands(s.Removed), keyCounts(s), dash(strings.Join(s.Config, ", ")))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, s := range rep.Streams {
			printDiffNames(w, s)
		}
	}
	if len(rep.Consumers) > 0 {
		fmt.Fprintln(w, "\nConsumers (acked up to):")
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  STREAM\tCONSUMER\tTHEN\tNOW\t")
		for _, c := range rep.Consumers {
			now, note := fmt.Sprint(c.Now), ""
			switch {
			case c.Gone:
				now, note = "-", "gone"
			case c.New:
				note = "new since the point"
			case c.Now != c.Then:
				note = "moved"
			}
			then := fmt.Sprint(c.Then)
			if c.New {
				then = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Stream, c.Consumer, then, now, note)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if rep.Next != "" {
		fmt.Fprintf(w, "\nMore names and sequences follow: ask again with --after '%s'\n", rep.Next)
	}
	return nil
}

// printDiffNames prints the names and sequences of one stream's change.
func printDiffNames(w io.Writer, s kept.StreamChange) {
	line := func(what string, names []string, cut bool) {
		if len(names) == 0 {
			return
		}
		more := ""
		if cut {
			more = " …"
		}
		fmt.Fprintf(w, "  %s %s: %s%s\n", s.Stream, what, strings.Join(names, " "), more)
	}
	line("appended", s.AppendedSeqs, s.SeqsCut && len(s.RemovedSeqs) == 0)
	line("removed", s.RemovedSeqs, s.SeqsCut)
	if s.Keys != nil {
		line("keys", s.Keys.Names, s.Keys.Cut)
	}
	if s.Objects != nil {
		line("objects", s.Objects.Names, s.Objects.Cut)
	}
}

func seqState(s *kept.SeqState) string {
	if s == nil {
		return "-"
	}
	return fmt.Sprintf("%s msgs %d..%d", kept.Thousands(s.Messages), s.FirstSeq, s.LastSeq)
}

func keyCounts(s kept.StreamChange) string {
	k := s.Keys
	if k == nil {
		k = s.Objects
	}
	if k == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d/%d", k.Added, k.Changed, k.Deleted)
}
