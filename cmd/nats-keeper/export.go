package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/transfer"
)

type exportOptions struct {
	Store    keeperStoreFlags
	Seal     sealFlags // --identity only
	Export   transfer.Export
	JSON     bool
	Out, Err io.Writer
}

func newExportCmd(e env) *cobra.Command {
	o := &exportOptions{Out: e.Out, Err: e.Err}
	cmd := &cobra.Command{
		Use:   "export MODULE LOCAL --form N --before FINGERPRINT --to DIR | export --aside ID --to DIR",
		Short: "Write a restore point or an aside out as nats backup directories",
		Long: `Write one nats backup directory per stream of a restore point (or, with
--aside, of a set-aside copy): DIR/<stream>/ holding stream.arc.s2 and
backup.json, exactly what 'nats backup stream' writes, so that
'nats backup restore stream DIR/<stream>' and 'nats backup validate' take it.

It reads the keeper's store directly (--dir, or --store as for serve), and
nothing else: no keeper needs to run, and the bytes go from the store to the
disk once. Every byte is checked against the archive's manifest as it is
written; an incremental point whose moment no keeper has made a point of
yet is composed from its base and capture segments as it is written out,
each stream decoded and checked against its backup.json, and nothing is
written to the store; nothing appears at DIR until every stream is whole (it is written
beside DIR and renamed into place), and a failure leaves nothing behind.
DIR must not exist, or be an empty directory; it is made 0700, its files 0600.

An encrypted point or aside (bus.tar.age) is decrypted with --identity as
it is written out, and the report says so; without the identity it is
refused, exit 7, and nothing is written.

Exits 2 on a bad request, 3 if there is no such point or aside, 4 if DIR
exists and is not empty, 7 if it is encrypted and --identity does not open
it, 1 if the archive fails its check.`,
		Args: args(0, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 1 || (len(a) == 0 && o.Export.Aside == "") {
				return &usageError{fmt.Errorf("export takes MODULE and LOCAL, or --aside ID")}
			}
			if len(a) == 2 {
				o.Export.Module, o.Export.Local = a[0], a[1]
			}
			return ran(runExport(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addKeeperStoreFlags(f, &o.Store, e)
	f.IntVar(&o.Export.Form, "form", 0, "the form of the restore point")
	f.StringVar(&o.Export.Fingerprint, "before", "", "the fingerprint of the restore point")
	f.StringVar(&o.Export.Aside, "aside", "", "export this set-aside copy (its id) instead of a restore point")
	f.StringVar(&o.Export.To, "to", "", "the directory to write, new or empty: one nats backup directory per stream in it")
	o.Seal.addIdentity(f, "exporting one needs it (the directories hold the decrypted data)")
	f.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func runExport(ctx context.Context, o exportOptions) error {
	done := outcome(o.Out, o.JSON, printExport)
	log := slog.New(slog.NewTextHandler(o.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	_, unseal, err := o.Seal.open()
	if err != nil {
		return done(nil, kept.Errorf(kept.ErrBadRequest, "%w, so nothing was exported", err))
	}
	o.Export.Unseal = unseal
	o.Export.Compose = func(ctx context.Context, st store.Store, rec *kept.Point) (transfer.ComposedArchive, error) {
		return keeper.ComposeMoment(ctx, keeper.ComposeConfig{Store: st, Unseal: unseal, Log: log, Version: buildVersion()}, rec)
	}
	st, err := o.Store.open(ctx, log, "nothing was exported")
	if err != nil {
		return done(nil, err)
	}
	defer st.Close()
	return done(transfer.ExportKept(ctx, st, o.Export))
}

// printExport prints the export's sentence and one line per stream.
func printExport(w io.Writer, rep *transfer.ExportReport) error {
	fmt.Fprintln(w, rep.Said)
	for _, s := range rep.Streams {
		fmt.Fprintf(w, "  %-24s %s (%s)\n", s.Name, s.Dir, humanBytes(s.DataSize))
	}
	return nil
}
