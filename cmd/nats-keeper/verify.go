package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
)

type verifyOptions struct {
	Client clientFlags
	Out    output
	Module string
	Local  string
	Form   int
	Before string
}

func newVerifyCmd(e env) *cobra.Command {
	o := &verifyOptions{Out: output{Out: e.Out, Err: e.Err, Progress: e.Terminal}}
	cmd := &cobra.Command{
		Use:   "verify MODULE LOCAL --form N --before FINGERPRINT",
		Short: "Re-check one restore point's archive against its manifest",
		Long: `Re-check one restore point's archive against its manifest, and the manifest
against point.json, without restoring it. An incremental point is checked from
its base and capture segments: the archive of its moment is composed from them
(each read whole and checked against its manifest) and checked as a written
archive is, and nothing is written.`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Module, o.Local = a[0], a[1]
			return ran(runVerify(cmd.Context(), *o))
		},
	}
	addClientFlags(cmd.Flags(), &o.Client, e)
	addNamedPointFlags(cmd, &o.Form, &o.Before)
	return cmd
}

func runVerify(ctx context.Context, o verifyOptions) error {
	req := kept.Request{Module: o.Module, Local: o.Local, Form: o.Form, Fingerprint: o.Before}
	return callVerb(ctx, o.Client, o.Out, kept.VerbVerify, req, printSaid)
}

// addNamedPointFlags adds --form and --before, the restore point a command
// names, both required.
func addNamedPointFlags(cmd *cobra.Command, form *int, before *string) {
	f := cmd.Flags()
	f.IntVar(form, "form", 0, "the form of the restore point")
	f.StringVar(before, "before", "", "the fingerprint of the restore point")
	_ = cmd.MarkFlagRequired("form")
	_ = cmd.MarkFlagRequired("before")
}
