package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
)

type policyOptions struct {
	Conn   connFlags
	Bucket string
	Out    io.Writer
	Err    io.Writer
	Action string // set, show, rm
	Module string
	Local  string
	Policy kept.Policy
	JSON   bool
}

func newPolicyCmd(e env) *cobra.Command {
	o := &policyOptions{Out: e.Out, Err: e.Err}
	cmd := &cobra.Command{
		Use:   "policy set|show|rm [MODULE LOCAL] [--keep-last N] [--keep-within D] [--keep-daily N] [--keep-weekly N] [--keep-monthly N] [--every SPEC [--time-zone TZ] [--form F]]",
		Short: "Record, show or remove the retention policy of a kept data (or, with no MODULE LOCAL, the default)",
		Long: `Record the retention policy that prune (and serve --prune-every) applies to one kept
data, as policy.<module>.<local> in the keeper's index, or with no MODULE LOCAL the default
for every kept data without its own, policy.default. show prints the policy that applies
and where it comes from; rm removes the record. The --keep-* flags are prune's.

With --every the policy also schedules points: each time the schedule falls due, one
keeper of the bus takes a point of the kept data at --form with fingerprint
sched-<UTC yyyymmddThhmm of the due time>, then prunes by the --keep-* rules. --every is
a span in whole minutes (90m, 6h, 1d) or a cron spec of five fields ("0 3 * * *",
"*/15 * * * mon-fri", @daily), read in --time-zone (default UTC).`,
		Args: func(cmd *cobra.Command, a []string) error {
			if len(a) != 1 && len(a) != 3 {
				return &usageError{err: errors.New("policy takes set, show or rm, then MODULE LOCAL or nothing (the default)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Action = a[0]
			if len(a) == 3 {
				o.Module, o.Local = a[1], a[2]
			}
			return ran(runPolicy(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addConnFlags(f, &o.Conn, e)
	addDomainFlag(f, &o.Conn)
	f.StringVar(&o.Bucket, "bucket", "kept", "KV bucket of the keeper's index")
	f.BoolVar(&o.JSON, "json", false, "print the policy as JSON")
	addPolicyFlags(f, &o.Policy)
	f.StringVar(&o.Policy.Every, "every", "", "take a point on this schedule: a span (6h, 1d) or a cron spec (\"0 3 * * *\"); the keepers of the bus take each due point once")
	f.StringVar(&o.Policy.TimeZone, "time-zone", "", "the IANA time zone the --every cron spec is read in (default UTC)")
	f.IntVar(&o.Policy.Form, "form", 0, "the form of the scheduled points (with --every)")
	return cmd
}

func runPolicy(ctx context.Context, o policyOptions) error {
	key, err := keeper.PolicyKey(o.Module, o.Local)
	if err != nil {
		return fmt.Errorf("%w, so nothing was done", err)
	}
	if o.Action != "set" && o.Action != "show" && o.Action != "rm" {
		return kept.Errorf(kept.ErrBadRequest, "policy %q is not set, show or rm, so nothing was done", o.Action)
	}
	if o.Action == "set" {
		if err := o.Policy.Check(); err != nil {
			return fmt.Errorf("%w, so nothing was recorded", err)
		}
		if o.Policy.Empty() {
			return kept.Errorf(kept.ErrBadRequest, "policy set needs at least one --keep-* flag, so nothing was recorded")
		}
	}
	if o.Conn.Server == "" && o.Conn.Context == "" {
		o.Conn.Server = clientDefaultURL
	}
	log := slog.New(slog.NewTextHandler(o.Err, &slog.HandlerOptions{Level: slog.LevelError}))
	nc, err := connect(ctx, o.Conn, "nats-keeper policy", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	domain, err := o.Conn.domain()
	if err != nil {
		return err
	}
	idx, err := jsbus.New(ctx, nc, jsbus.WithBucket(o.Bucket), jsbus.WithLogger(log), jsbus.WithDomain(domain))
	if err != nil {
		return kept.Errorf(kept.ErrNoBus, "could not open the index %s: %v, so nothing was done", o.Bucket, err)
	}
	switch o.Action {
	case "set":
		data, _ := json.Marshal(o.Policy)
		if err := idx.Put(ctx, key, data); err != nil {
			return kept.Errorf(kept.ErrNoBus, "recording %s: %v, so nothing was recorded", key, err)
		}
		fmt.Fprintf(o.Out, "Recorded %s: %s.\n", key, o.Policy)
	case "rm":
		if err := idx.Delete(ctx, key); err != nil {
			return kept.Errorf(kept.ErrNoBus, "removing %s: %v", key, err)
		}
		fmt.Fprintf(o.Out, "Removed %s (if it was recorded).\n", key)
	case "show":
		return showPolicy(ctx, o, idx, key)
	}
	return nil
}

func showPolicy(ctx context.Context, o policyOptions, idx keeper.Index, key string) error {
	keys := []string{key}
	if key != "policy.default" {
		keys = append(keys, "policy.default")
	}
	for _, k := range keys {
		data, err := idx.Get(ctx, k)
		if errors.Is(err, kept.ErrNotFound) {
			continue
		}
		if err != nil {
			return kept.Errorf(kept.ErrNoBus, "reading %s: %v", k, err)
		}
		var p kept.Policy
		if err := json.Unmarshal(data, &p); err != nil {
			return kept.Errorf(kept.ErrFailed, "%s is not a readable policy: %v", k, err)
		}
		if o.JSON {
			out, _ := json.Marshal(map[string]any{"key": k, "policy": p})
			fmt.Fprintln(o.Out, string(out))
			return nil
		}
		fmt.Fprintf(o.Out, "%s: %s\n", k, p)
		return nil
	}
	return kept.Errorf(kept.ErrNotFound, "no policy is recorded as %s", joinKeys(keys))
}

func joinKeys(keys []string) string {
	if len(keys) == 1 {
		return keys[0]
	}
	return keys[0] + " or " + keys[1]
}
