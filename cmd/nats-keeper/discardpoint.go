package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
)

type discardPointOptions struct {
	Client clientFlags
	Out    output
	Module string
	Local  string
	Form   int
	Before string
	Why    string
}

func newDiscardPointCmd(e env) *cobra.Command {
	o := &discardPointOptions{Out: output{Out: e.Out, Err: e.Err}}
	cmd := &cobra.Command{
		Use:   "discard-point MODULE LOCAL --form N --before FINGERPRINT --why TEXT",
		Short: "Remove one restore point, on a person's call",
		Long: `Remove one restore point of a kept data (see 'nats-keeper list'), whatever the
retention policy says: prune-kept always keeps the newest point. The act is
recorded, with who and why, before anything is removed; if it cannot be
recorded, nothing is removed. It is refused (exit 2) while a restore needs
the point: an unfinished restore that restores from it, or any verb that
holds the kept data's lease.`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Module, o.Local = a[0], a[1]
			return ran(runDiscardPoint(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addClientFlags(f, &o.Client, e)
	addNamedPointFlags(cmd, &o.Form, &o.Before)
	f.StringVar(&o.Why, "why", "", "why this point may be removed (required)")
	_ = cmd.MarkFlagRequired("why")
	return cmd
}

func runDiscardPoint(ctx context.Context, o discardPointOptions) error {
	req := kept.Request{Module: o.Module, Local: o.Local, Form: o.Form, Fingerprint: o.Before, Why: o.Why}
	return callVerb(ctx, o.Client, o.Out, kept.VerbDiscardPoint, req, printSaid)
}
