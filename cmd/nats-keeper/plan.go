package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
)

type planOptions struct {
	Client    clientFlags
	Out       output
	Action    string // set, show, rm
	Module    string
	Local     string
	Streams   []string
	Consumers []string // STREAM/CONSUMER
	Why       string
}

func newPlanCmd(e env) *cobra.Command {
	o := &planOptions{Out: output{Out: e.Out, Err: e.Err}}
	cmd := &cobra.Command{
		Use:   "plan set MODULE LOCAL STREAM... [--consumer STREAM/CONSUMER]... | plan show MODULE LOCAL | plan rm MODULE LOCAL",
		Short: "Record, show or remove the plan of a kept data: the streams it is made of",
		Long: `A plan lists the streams that make up one kept data, and wins over the naming rule
(KV_<module>_<local>, OBJ_<module>_<local>, <module>_<local>). The keeper records it as
plan.<module>.<local> in its index; every snapshot and restore from then on takes exactly
those streams. --consumer STREAM/CONSUMER (repeatable) ties a durable consumer to the kept
data whatever its name says.

The keeper refuses (exit 2, nothing recorded) a plan that names one of its own streams
(KV_kept or its index bucket's, KEEPER_ACTS, KEEPER_ACTS_<prefix>) or a stream of another
kept data it knows: one another plan lists, one a point or aside of another kept data holds,
or one the naming rule gives to another kept data with points, asides or a plan.
show prints the plan (exit 3 when none is recorded); rm removes it, and the naming rule
applies again.`,
		Args: func(cmd *cobra.Command, a []string) error {
			switch {
			case len(a) >= 1 && a[0] == "set" && len(a) >= 4:
			case len(a) == 3 && (a[0] == "show" || a[0] == "rm"):
			default:
				return &usageError{err: errors.New("plan takes set MODULE LOCAL STREAM..., show MODULE LOCAL or rm MODULE LOCAL")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Action, o.Module, o.Local, o.Streams = a[0], a[1], a[2], a[3:]
			return ran(runPlan(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addClientFlags(f, &o.Client, e)
	f.StringArrayVar(&o.Consumers, "consumer", nil, "STREAM/CONSUMER: a durable consumer that belongs to the kept data (set only; repeatable)")
	f.StringVar(&o.Why, "why", "", "why, recorded with the act")
	return cmd
}

func runPlan(ctx context.Context, o planOptions) error {
	req := kept.Request{Module: o.Module, Local: o.Local, Why: o.Why}
	verb := map[string]string{"set": kept.VerbSetPlan, "show": kept.VerbShowPlan, "rm": kept.VerbRemovePlan}[o.Action]
	if verb == "" {
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "plan %q is not set, show or rm, so nothing was done", o.Action))
	}
	if verb != kept.VerbSetPlan && (len(o.Streams) > 0 || len(o.Consumers) > 0) {
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "plan %s takes no streams or --consumer, so nothing was done", o.Action))
	}
	if verb == kept.VerbSetPlan {
		req.Streams = o.Streams
		for _, c := range o.Consumers {
			stream, consumer, ok := strings.Cut(c, "/")
			if !ok || stream == "" || consumer == "" {
				return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "--consumer %q is not STREAM/CONSUMER, so no plan was recorded", c))
			}
			req.Consumers = append(req.Consumers, kept.PlanConsumer{Stream: stream, Consumer: consumer})
		}
	}
	return callVerb(ctx, o.Client, o.Out, verb, req, printPlan)
}

// printPlan prints the reply's sentence, then the plan, if the reply has one.
func printPlan(w io.Writer, rep *kept.Reply) error {
	if _, err := fmt.Fprintln(w, rep.Said); err != nil {
		return err
	}
	p := rep.KeptPlan
	if p == nil {
		return nil
	}
	for _, s := range p.Streams {
		fmt.Fprintf(w, "  stream    %s\n", s)
	}
	for _, c := range p.Consumers {
		fmt.Fprintf(w, "  consumer  %s/%s\n", c.Stream, c.Consumer)
	}
	return nil
}
