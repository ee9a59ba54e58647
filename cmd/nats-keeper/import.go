package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

type importOptions struct {
	Conn     connFlags
	Store    keeperStoreFlags
	Seal     sealFlags // --encrypt-to, --encrypt-to-file only
	Prefix   string
	Bucket   string
	Request  kept.Request
	From     []string
	JSON     bool
	Out, Err io.Writer
}

func newImportCmd(e env) *cobra.Command {
	o := &importOptions{Out: e.Out, Err: e.Err}
	cmd := &cobra.Command{
		Use:   "import MODULE LOCAL --form N --before FINGERPRINT --from DIR [--from DIR...]",
		Short: "Make a restore point from nats backup directories",
		Long: `Make the restore point of MODULE's kept data LOCAL at form N before
FINGERPRINT from 'nats backup stream' directories, one per stream (natscli
v0.5.0 against a NATS Server 2.15 or newer; older natscli's stream.tar.s2 is
read when it holds a 2.15 snapshot, see the README).

Every directory is checked whole before anything is written: its snapshot
decodes to its end, its backup.json names the stream, and the stream is one
of the kept data's (its plan, else KV_, OBJ_ or plain <module>_<local>).
Then the point is committed as snapshot-kept commits one: an earlier point
of the same form and fingerprint is set aside (reason replaced), bus.tar is
written, then point.json, the index record and the act (import-kept).

It runs in this process, beside the directories: it opens the keeper's store
(--dir, or --store as for serve) and the keeper's state on the bus (--server,
--prefix, --bucket as the serving keeper has them), so the bytes go from the
disk into the store once. A serving keeper on the same store and bus sees
the point at once; the kept data's lease keeps the two apart.

Exits 2 if a directory is refused (nothing is written), 4 if the kept data
is busy, 5 if the bus or the store cannot be reached, 1 on a failure.`,
		Args: args(2, 2),
		RunE: func(cmd *cobra.Command, a []string) error {
			o.Request.Module, o.Request.Local = a[0], a[1]
			return ran(runImport(cmd.Context(), *o))
		},
	}
	f := cmd.Flags()
	addConnFlags(f, &o.Conn, e)
	addDomainFlag(f, &o.Conn)
	addKeeperStoreFlags(f, &o.Store, e)
	f.StringVar(&o.Prefix, "prefix", verbs.DefaultPrefix, "subject prefix of the keeper's verbs (its acts are recorded under it)")
	f.StringVar(&o.Bucket, "bucket", wiring.DefaultBucket, "KV bucket of the keeper's index")
	o.Seal.addEncrypt(f)
	f.IntVar(&o.Request.Form, "form", 0, "the form (shape version) of the kept data in the backups")
	f.StringVar(&o.Request.Fingerprint, "before", "", "fingerprint of the change the point protects against")
	f.StringVar(&o.Request.CatchUp, "catch-up", "", "the tool that brings data at this form up to the next")
	f.StringArrayVar(&o.From, "from", nil, "a nats backup stream directory (repeat for each stream)")
	f.StringVar(&o.Request.Caller, "caller", defaultCaller(e), "who is asking, recorded with the act")
	f.StringVar(&o.Request.Why, "why", "", "why, recorded with the act")
	f.BoolVar(&o.JSON, "json", false, "print the reply as JSON")
	_ = cmd.MarkFlagRequired("form")
	_ = cmd.MarkFlagRequired("before")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

func runImport(ctx context.Context, o importOptions) error {
	done := outcome(o.Out, o.JSON, printSaid)
	if err := kept.CheckRequest(kept.VerbImport, o.Request); err != nil {
		return done(nil, err)
	}
	if err := verbs.CheckPrefix(o.Prefix); err != nil {
		return done(nil, kept.Errorf(kept.ErrBadRequest, "--prefix: %w, so nothing was done", err))
	}
	log := slog.New(slog.NewTextHandler(o.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	conn := o.Conn
	if conn.Server == "" && conn.Context == "" {
		conn.Server = clientDefaultURL
	}
	nc, err := connect(ctx, conn, "nats-keeper import", log)
	if err != nil {
		return done(nil, err)
	}
	defer nc.Close()
	seal, _, err := o.Seal.open()
	if err != nil {
		return done(nil, kept.Errorf(kept.ErrBadRequest, "%w, so nothing was imported", err))
	}
	st, err := o.Store.open(ctx, log, "nothing was imported")
	if err != nil {
		return done(nil, err)
	}
	defer st.Close()
	domain, err := conn.domain()
	if err != nil {
		return done(nil, err)
	}
	k, err := wiring.Open(ctx, nc, wiring.Setup{Store: st, Prefix: o.Prefix, Bucket: o.Bucket, JSDomain: domain, Version: buildVersion(), Logger: log, Seal: seal})
	if err != nil {
		return done(nil, err)
	}
	return done(k.ImportKept(ctx, o.Request, o.From))
}
