package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nats-keeper/nats-keeper/kept"
)

type pruneOptions struct {
	Client clientFlags
	Out    output
	Module string
	Local  string
	Policy kept.Policy
	DryRun bool
	Why    string
}

func newPruneCmd(e env) *cobra.Command {
	o := &pruneOptions{Out: output{Out: e.Out, Err: e.Err}}
	cmd := &cobra.Command{
		Use:   "prune [MODULE [LOCAL]] [--keep-last N] [--keep-within D] [--keep-daily N] [--keep-weekly N] [--keep-monthly N] [--dry-run]",
		Short: "Remove restore points by a retention policy (never an aside, never the newest point)",
		Long: `Apply a retention policy to the restore points of each kept data (one, a module's,
or all), like restic's forget. A point stays when any rule keeps it:
  --keep-last N      the newest N points
  --keep-within D    the points taken within D of the kept data's newest point (not of now)
  --keep-daily N     the newest point of each of the last N days that hold a point (UTC)
  --keep-weekly N    … of each of the last N weeks, Monday to Sunday (UTC)
  --keep-monthly N   … of each of the last N months
Whatever the policy says, prune never removes the newest point of a kept data, a point an
unfinished restore names, a point whose keep-until (snapshot-kept --keep-for) has not come,
or any set-aside copy. Without any --keep-* flag the recorded policy of each kept data is
applied (nats-keeper policy set); with neither, prune is refused and removes nothing.
--dry-run lists every point with keep or remove and the rules that kept it; the prune
itself gives the same list. Each removal is recorded as an act before the point goes.`,
		Args: args(0, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			optionalKept(a, &o.Module, &o.Local)
			return ran(runPrune(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addClientFlags(f, &o.Client, e)
	addPolicyFlags(f, &o.Policy)
	f.BoolVar(&o.DryRun, "dry-run", false, "say what would be kept and removed, and remove nothing")
	f.StringVar(&o.Why, "why", "", "why, recorded with the acts")
	return cmd
}

func addPolicyFlags(f *pflag.FlagSet, p *kept.Policy) {
	f.IntVar(&p.KeepLast, "keep-last", 0, "keep the newest N points")
	f.Var(&p.KeepWithin, "keep-within", "keep the points taken within this of the newest (30d, 2w, 12h)")
	f.IntVar(&p.KeepDaily, "keep-daily", 0, "keep the newest point of each of the last N days that hold one")
	f.IntVar(&p.KeepWeekly, "keep-weekly", 0, "keep the newest point of each of the last N weeks that hold one")
	f.IntVar(&p.KeepMonthly, "keep-monthly", 0, "keep the newest point of each of the last N months that hold one")
}

func runPrune(ctx context.Context, o pruneOptions) error {
	req := kept.Request{Module: o.Module, Local: o.Local, DryRun: o.DryRun, Why: o.Why}
	if !o.Policy.Empty() {
		req.Policy = &o.Policy
	}
	return callVerb(ctx, o.Client, o.Out, kept.VerbPrune, req, printPrune)
}

func printPrune(w io.Writer, rep *kept.Reply) error {
	fmt.Fprintln(w, rep.Said)
	if len(rep.Pruned) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\n  MODULE\tLOCAL\tFORM\tBEFORE\tTAKEN\tSIZE\tDECISION\tWHY")
	for _, d := range rep.Pruned {
		p := d.Point
		what := "remove"
		if d.Keep {
			what = "keep"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Module, p.Local, p.Form, p.Fingerprint,
			p.Taken.UTC().Format("2006-01-02 15:04:05Z"), humanBytes(p.ArchiveSize), what, dash(strings.Join(d.Reasons, ", ")))
	}
	return tw.Flush()
}
