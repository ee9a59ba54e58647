package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

type listOptions struct {
	Client clientFlags
	Out    output
	Module string
	Local  string
}

func newListCmd(e env) *cobra.Command {
	o := &listOptions{Out: output{Out: e.Out, Err: e.Err}}
	cmd := &cobra.Command{
		Use:   "list [MODULE [LOCAL]]",
		Short: "List restore points, set-aside data and captures",
		Args:  args(0, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			optionalKept(a, &o.Module, &o.Local)
			return ran(runList(cmd.Context(), *o))
		},
	}
	addClientFlags(cmd.Flags(), &o.Client, e)
	return cmd
}

// runList lists everything, following list-kept's pages, so that the text
// and --json show every point and aside as one listing.
func runList(ctx context.Context, o listOptions) error {
	return callClient(ctx, o.Client, o.Out, kept.VerbList, kept.Request{Module: o.Module, Local: o.Local},
		(*verbs.Client).ListAllKept, printList)
}
