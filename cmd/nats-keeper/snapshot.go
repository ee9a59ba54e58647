package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
)

type snapshotOptions struct {
	Client  clientFlags
	Out     output
	Module  string
	Local   string
	Form    int
	Before  string
	CatchUp string
	KeepFor kept.Duration
}

func newSnapshotCmd(e env) *cobra.Command {
	o := &snapshotOptions{Out: output{Out: e.Out, Err: e.Err, Progress: e.Terminal}}
	cmd := &cobra.Command{
		Use:   "snapshot-kept MODULE LOCAL --form N --before FINGERPRINT [--catch-up TOOL]",
		Short: "Take the restore point of one kept data",
		Args:  args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Module, o.Local = a[0], a[1]
			return ran(runSnapshot(cmd.Context(), *o))
		},
	}
	addClientFlags(cmd.Flags(), &o.Client, e)
	addPointFlags(cmd, &o.Form, &o.Before, &o.CatchUp, &o.KeepFor)
	return cmd
}

// addPointFlags adds the flags that name the restore point a command takes
// (snapshot-kept, guard): --form and --before, required, --catch-up and
// --keep-for.
func addPointFlags(cmd *cobra.Command, form *int, before, catchUp *string, keepFor *kept.Duration) {
	f := cmd.Flags()
	f.IntVar(form, "form", 0, "the form (shape version) of the kept data now")
	f.StringVar(before, "before", "", "fingerprint of the change the point protects against")
	f.StringVar(catchUp, "catch-up", "", "the tool that brings data at this form up to the next")
	f.Var(keepFor, "keep-for", "protect the point from prune for this long after it is taken (30d, 2w, 12h)")
	_ = cmd.MarkFlagRequired("form")
	_ = cmd.MarkFlagRequired("before")
}

func runSnapshot(ctx context.Context, o snapshotOptions) error {
	req := kept.Request{Module: o.Module, Local: o.Local, Form: o.Form, Fingerprint: o.Before, CatchUp: o.CatchUp, KeepFor: o.KeepFor}
	return callVerb(ctx, o.Client, o.Out, kept.VerbSnapshot, req, printSaid)
}
