package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/transfer"
)

type copyOptions struct {
	From, To   string // store URLs
	StoreFlags storeFlags
	Module     string
	Local      string
	JSON       bool
	Out, Err   io.Writer
}

func newCopyCmd(e env) *cobra.Command {
	o := &copyOptions{Out: e.Out, Err: e.Err}
	cmd := &cobra.Command{
		Use:   "copy --from-store URL --to-store URL [MODULE [LOCAL]]",
		Short: "Copy restore points and set-aside data from one store into another",
		Long: `Copy the restore points and set-aside data of one store into another (of one
module, or of one kept data, when MODULE and LOCAL are given): to move a keeper
directory into S3, or to keep a second copy of the points on another bus.

A store is file:///path, nats://host:port/bucket or s3://bucket/prefix, as for
serve --store; the --store-* and --s3-* flags apply to both stores, and S3
credentials come from the AWS environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...). No keeper needs to run, and none
should start on the target store while the copy runs: a keeper that starts
removes archives that have no record yet, such as the one being copied.

Each point and aside is copied archive first, then verified whole in the
target (every entry's size and SHA-256, every stream decoded), and only then
given its record there, written last, so a copy that fails leaves nothing the
target's keeper would take for a point. An incremental point is copied as a
full point: the archive of the point of its moment, or, before a keeper made
that point, one composed from its base and capture segments straight into
the target and checked as it is written; one whose base is encrypted needs
that point made first (copy never decrypts). One already in the target, equal, is
skipped: running copy again copies only what is new. The source is only read.
Neither store's index is touched: a keeper on the target store brings its
index up to date when it starts, so start (or restart) it after the copy.

Prints one line per point and aside (copied, skipped or failed, and why) and a
total; --json prints the report as JSON. Exits 1 if any failed (the others
are copied), 2 if a store is not given, 5 if a store cannot be opened.`,
		Args: args(0, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			optionalKept(a, &o.Module, &o.Local)
			return ran(runCopy(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.From, "from-store", "", "the store to copy from: file:///path, nats://host:port/bucket or s3://bucket/prefix")
	f.StringVar(&o.To, "to-store", "", "the store to copy into, in the same forms")
	addStoreFlags(f, &o.StoreFlags)
	f.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	return cmd
}

// copyJSON is the report copy --json prints.
type copyJSON struct {
	From string `json:"from"`
	To   string `json:"to"`
	*transfer.CopyReport
}

func runCopy(ctx context.Context, o copyOptions) error {
	fail := func(err error) error {
		if o.JSON {
			printJSONError(o.Out, err)
		}
		return err
	}
	if o.From == "" || o.To == "" {
		return fail(kept.Errorf(kept.ErrBadRequest, "copy needs both --from-store and --to-store (a directory is file:///path), so nothing was copied"))
	}
	if o.Local != "" && o.Module == "" {
		return fail(kept.Errorf(kept.ErrBadRequest, "a kept data to copy needs its module, so nothing was copied"))
	}
	log := slog.New(slog.NewTextHandler(o.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	from, err := openStore(ctx, o.From, "", o.StoreFlags, log)
	if err != nil {
		return fail(fmt.Errorf("--from-store: %w, so nothing was copied", err))
	}
	defer from.Close()
	to, err := openStore(ctx, o.To, "", o.StoreFlags, log)
	if err != nil {
		return fail(fmt.Errorf("--to-store: %w, so nothing was copied", err))
	}
	defer to.Close()
	src, dst := from.Describe().URL, to.Describe().URL
	if src == dst {
		return fail(kept.Errorf(kept.ErrBadRequest, "--from-store and --to-store are both %s, so nothing was copied", src))
	}
	// Every outcome is printed; the keeper's own log of them would repeat it.
	quiet := slog.New(slog.DiscardHandler)
	compose := func(ctx context.Context, st store.Store, rec *kept.Point) (transfer.ComposedArchive, error) {
		return keeper.ComposeMoment(ctx, keeper.ComposeConfig{Store: st, Log: quiet, Version: buildVersion()}, rec)
	}
	rep, err := transfer.CopyStores(ctx, from, to, o.Module, o.Local, quiet, compose)
	if rep == nil {
		return fail(fmt.Errorf("copying from %s to %s: %w", src, dst, err))
	}
	if o.JSON {
		b, jerr := json.MarshalIndent(copyJSON{From: src, To: dst, CopyReport: rep}, "", "  ")
		if jerr != nil {
			return jerr
		}
		fmt.Fprintf(o.Out, "%s\n", b)
	} else {
		printCopy(o.Out, rep, src, dst)
	}
	if err != nil && ctx.Err() != nil {
		return kept.Errorf(kept.ErrFailed, "the copy from %s to %s was stopped (%v) after %d point(s) and aside(s); "+
			"the rest were not copied, and running it again goes on where it stopped", src, dst, err,
			len(rep.Copied)+len(rep.Skipped)+len(rep.Failed))
	}
	return err
}

// printCopy prints one line per point and aside, then the total.
func printCopy(w io.Writer, rep *transfer.CopyReport, from, to string) {
	for _, s := range rep.Copied {
		if slices.Contains(rep.Encrypted, s) {
			fmt.Fprintf(w, "copied   %s (encrypted: copied as stored, its ciphertext's checksum matches its record; not decrypted, its contents not verified here)\n", s)
			continue
		}
		fmt.Fprintf(w, "copied   %s\n", s)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "skipped  %s (already in the target, equal)\n", s)
	}
	for _, s := range rep.Failed {
		fmt.Fprintf(w, "FAILED   %s\n", s)
	}
	n := len(rep.Copied) + len(rep.Skipped) + len(rep.Failed)
	verdict := "done"
	if len(rep.Failed) > 0 {
		verdict = "NOT ALL COPIED"
	}
	fmt.Fprintf(w, "%s: %d copied, %d skipped, %d failed, of %d point(s) and aside(s) from %s to %s\n",
		verdict, len(rep.Copied), len(rep.Skipped), len(rep.Failed), n, from, to)
}
