package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/kept"
)

type restoreOptions struct {
	Client    clientFlags
	Out       output
	Module    string
	Local     string
	Form      int
	FormSet   bool
	Before    string
	Why       string
	AsideOnly bool
	DryRun    bool
	From      string
	Replicas  int
	Cluster   string
	Tags      []string
	Method    string
	Leave     string
	At        string   // --at: restore the kept data as it was at this RFC 3339 time
	AtSeq     []string // --at-seq: STREAM=N, as it was when each stream's last sequence was N
}

func newRestoreCmd(e env) *cobra.Command {
	o := &restoreOptions{Out: output{Out: e.Out, Err: e.Err, Progress: e.Terminal}}
	cmd := &cobra.Command{
		Use:   "restore-kept MODULE LOCAL --form N --before FINGERPRINT --why TEXT [--method auto|full|delta|logical] [--downstream leave] [--aside-only] [--dry-run] [--from DIR | --from aside/ID | --at TIME | --at-seq STREAM=N...] [--replicas N] [--cluster C] [--tag T]...",
		Short: "Restore a restore point, setting the live data aside first",
		Long: `Restore a restore point of one kept data. The point's archive is verified
before the bus is touched; the live data is set aside (kept on disk until a
person discards it) before anything is removed.

--aside-only sets the live data aside and removes it, restoring nothing.
--dry-run prints exactly what would happen and changes nothing.
--method picks how each stream is rolled back: auto (the default) rolls a
stream back by delta where the point is a prefix of it and that is cheaper,
else restores it whole (full); delta refuses, before anything changes, a
stream it cannot roll back exactly; logical writes a KV bucket's values back
as new revisions. The reply says each stream's method and why.
--downstream leave restores whole a stream that others mirror or source,
which is refused without it.
--replicas, --cluster and --tag change the restored streams' configuration,
as nats backup restore's do: an R3 point restores into a single server with
--replicas 1 (and is refused without it, before anything is touched).

--at TIME (RFC 3339) restores the kept data as it was at that moment, and
--at-seq STREAM=N (repeatable) as it was when each stream named ended at
sequence N, from its capture (see capture): the archive of the moment is
composed from the newest base before it and its segments, checked as it is
composed, and restored as any point. Over live data it is composed again
as it is restored, held to what was checked, and written nowhere; in a dry
run, or where the restore is planned only from the moment's point, it is
made into the point of the moment, which stays. A moment outside the
captured window is refused, naming the window.
They take no --form, --before, --from or --aside-only.`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Module, o.Local = a[0], a[1]
			o.FormSet = cmd.Flags().Changed("form")
			return ran(runRestore(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addClientFlags(f, &o.Client, e)
	f.IntVar(&o.Form, "form", 0, "the form of the restore point")
	f.StringVar(&o.Before, "before", "", "the fingerprint of the restore point")
	f.StringVar(&o.Why, "why", "", "why the live data is replaced (required)")
	f.BoolVar(&o.AsideOnly, "aside-only", false, "only set the live data aside and remove it; restore nothing")
	f.BoolVar(&o.DryRun, "dry-run", false, "print the plan and change nothing")
	f.StringVar(&o.From, "from", "", "the restore point's directory, or aside/ID to put a set-aside copy back, instead of --form and --before")
	f.IntVar(&o.Replicas, "replicas", 0, "restore the point's streams with this many replicas (1-5) instead of their own")
	f.StringVar(&o.Cluster, "cluster", "", "place the restored streams in this cluster (replaces their placement)")
	f.StringArrayVar(&o.Tags, "tag", nil, "place the restored streams on servers with this tag (repeatable; replaces their placement)")
	f.StringVar(&o.Method, "method", "", "how each stream is rolled back: auto (the default), full, delta or logical")
	f.StringVar(&o.Leave, "downstream", "", `"leave": restore whole a stream that others mirror or source`)
	f.StringVar(&o.At, "at", "", "restore the kept data as it was at this moment (RFC 3339: 2026-12-06T10:30:00Z), from its capture")
	f.StringArrayVar(&o.AtSeq, "at-seq", nil, "restore the kept data as it was when stream STREAM ended at sequence N (STREAM=N, repeatable), from its capture")
	_ = cmd.MarkFlagRequired("why")
	return cmd
}

func runRestore(ctx context.Context, o restoreOptions) error {
	atSeq, err := parseAtSeq(o.AtSeq)
	if err != nil {
		return jsonErr(o.Client, o.Out, err)
	}
	moment := o.At != "" || atSeq != nil
	switch {
	case o.At != "" && atSeq != nil:
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "restore-kept takes --at or --at-seq, not both, so nothing was done"))
	case moment && (o.From != "" || o.Before != "" || o.FormSet || o.AsideOnly):
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest,
			"restore-kept --at or --at-seq names the moment to restore, so it takes no --from, --before, --form or --aside-only; nothing was done"))
	case !moment && !o.AsideOnly && o.From == "" && (!o.FormSet || o.Before == ""):
		return jsonErr(o.Client, o.Out, kept.Errorf(kept.ErrBadRequest, "restore-kept needs --form and --before (or --from, --at, --at-seq, or --aside-only), so nothing was done"))
	}
	req := kept.Request{Module: o.Module, Local: o.Local, Form: o.Form, Fingerprint: o.Before, Why: o.Why,
		AsideOnly: o.AsideOnly, DryRun: o.DryRun, From: o.From,
		Replicas: o.Replicas, PlacementCluster: o.Cluster, PlacementTags: o.Tags, Method: o.Method, Downstream: o.Leave,
		At: o.At, AtSeq: atSeq}
	return callVerb(ctx, o.Client, o.Out, kept.VerbRestore, req, printSaid)
}

// parseAtSeq reads --at-seq's STREAM=N values into restore-kept's at-seq:
// nil when there are none.
func parseAtSeq(vals []string) (map[string]uint64, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	seqs := make(map[string]uint64, len(vals))
	for _, v := range vals {
		stream, num, ok := strings.Cut(v, "=")
		n, err := strconv.ParseUint(num, 10, 64)
		if !ok || stream == "" || err != nil || n == 0 {
			return nil, kept.Errorf(kept.ErrBadRequest, "--at-seq %.64q is not STREAM=N (a stream's name, =, and the sequence it is restored up to, from 1), so nothing was done", v)
		}
		if _, twice := seqs[stream]; twice {
			return nil, kept.Errorf(kept.ErrBadRequest, "--at-seq names the stream %.64q twice, so nothing was done", stream)
		}
		seqs[stream] = n
	}
	return seqs, nil
}
