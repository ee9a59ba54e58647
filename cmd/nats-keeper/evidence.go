package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
)

type evidenceOptions struct {
	Client clientFlags
	Out    output
	ID     string // an aside id (or aside/<id>), or a point's directory points/<module>/<local>/f<form>-<fingerprint>
}

func newEvidenceCmd(e env) *cobra.Command {
	o := &evidenceOptions{Out: output{Out: e.Out, Err: e.Err}}
	cmd := &cobra.Command{
		Use:   "evidence ASIDE_ID | points/MODULE/LOCAL/fFORM-FINGERPRINT",
		Short: "Print the evidence report of a restore: PASS or FAIL for each check, with its figures",
		Long: "Print the evidence report a restore-kept wrote: of the restore that made the aside ASIDE_ID, or, for a\n" +
			"restore into absent kept data, the last one made from the point in points/MODULE/LOCAL/fFORM-FINGERPRINT\n" +
			"(the dir list shows). The text is the report's summary.md; with --json the reply's evidence key is evidence.json.",
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.ID = a[0]
			return ran(runEvidence(cmd.Context(), *o))
		},
	}
	addClientFlags(cmd.Flags(), &o.Client, e)
	return cmd
}

func runEvidence(ctx context.Context, o evidenceOptions) error {
	// With --json the reply is printed as JSON: its evidence key is the
	// report as evidence.json holds it.
	req := kept.Request{From: strings.TrimSuffix(o.ID, "/")}
	return callVerb(ctx, o.Client, o.Out, kept.VerbShowEvidence, req, printEvidence)
}

// printEvidence prints the reply's sentence and the report as summary.md.
func printEvidence(w io.Writer, rep *kept.Reply) error {
	if rep.Evidence == nil {
		return kept.Errorf(kept.ErrFailed, "the keeper's reply holds no evidence report: %s", rep.Said)
	}
	_, err := fmt.Fprintf(w, "%s\n\n%s", rep.Said, rep.Evidence.Summary())
	return err
}
