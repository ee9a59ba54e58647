package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/verbs"
)

type snapshotOptions struct {
	Client  clientFlags
	Out     output
	Module  string
	Local   string
	Form    int
	Before  string
	CatchUp string
	KeepFor keeper.Duration
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
	f := cmd.Flags()
	addClientFlags(f, &o.Client, e)
	f.IntVar(&o.Form, "form", 0, "the form (shape version) of the kept data now")
	f.StringVar(&o.Before, "before", "", "fingerprint of the change the point protects against")
	f.StringVar(&o.CatchUp, "catch-up", "", "the tool that brings data at this form up to the next")
	f.Var(&o.KeepFor, "keep-for", "protect the point from prune for this long after it is taken (30d, 2w, 12h)")
	_ = cmd.MarkFlagRequired("form")
	_ = cmd.MarkFlagRequired("before")
	return cmd
}

func runSnapshot(ctx context.Context, o snapshotOptions) error {
	req := keeper.Request{Module: o.Module, Local: o.Local, Form: o.Form, Fingerprint: o.Before, CatchUp: o.CatchUp, KeepFor: o.KeepFor}
	return callVerb(ctx, o.Client, o.Out, verbs.VerbSnapshot, req, printSaid)
}
