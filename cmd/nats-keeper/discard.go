package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
)

type discardOptions struct {
	Client clientFlags
	Out    output
	ID     string
	Why    string
}

func newDiscardCmd(e env) *cobra.Command {
	o := &discardOptions{Out: output{Out: e.Out, Err: e.Err}}
	cmd := &cobra.Command{
		Use:   "discard-aside ID --why TEXT",
		Short: "Remove one set-aside copy, on a person's call",
		Long: `Remove one set-aside copy by its id (see 'nats-keeper list'). The act is
recorded, with who and why, before anything is removed; if it cannot be
recorded, nothing is removed.`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.ID = a[0]
			return ran(runDiscard(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addClientFlags(f, &o.Client, e)
	f.StringVar(&o.Why, "why", "", "why this copy may be removed (required)")
	_ = cmd.MarkFlagRequired("why")
	return cmd
}

func runDiscard(ctx context.Context, o discardOptions) error {
	return callVerb(ctx, o.Client, o.Out, kept.VerbDiscard, kept.Request{From: o.ID, Why: o.Why}, printSaid)
}
