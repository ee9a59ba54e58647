package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/nats-keeper/nats-keeper/internal/privdir"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// keeperStoreFlags name a keeper's store for a command that works on it in
// its own process (export, import): --dir and --store, as serve takes them.
type keeperStoreFlags struct {
	Dir   string
	Store string
	Flags storeFlags
}

func addKeeperStoreFlags(fs *pflag.FlagSet, f *keeperStoreFlags, e env) {
	addDirStoreFlags(fs, &f.Dir, &f.Store, &f.Flags, e, "where points and asides live")
}

// addDirStoreFlags adds --dir, --store and the store's flags, as serve,
// export and import take them.
func addDirStoreFlags(fs *pflag.FlagSet, dir, st *string, sf *storeFlags, e env, what string) {
	def := e.Getenv("NATS_KEEPER_DIR")
	if def == "" {
		def = "./nats-keeper-data"
	}
	fs.StringVar(dir, "dir", def, "the keeper's directory, its store unless --store says otherwise (default $NATS_KEEPER_DIR, else ./nats-keeper-data)")
	fs.Lookup("dir").DefValue = "" // the usage says the default; pflag would print it a second time
	fs.StringVar(st, "store", e.Getenv("NATS_KEEPER_STORE"), what+": file:///path (default: --dir), "+
		"nats://host:port/bucket (a JetStream object store, made if missing) or s3://bucket/prefix (default $NATS_KEEPER_STORE)")
	addStoreFlags(fs, sf)
}

// open opens the keeper's store; a directory store under --dir is checked
// to be private first, as serve checks it. nothing ends the sentences.
func (f keeperStoreFlags) open(ctx context.Context, log *slog.Logger, nothing string) (store.Store, error) {
	dir := f.Dir
	if f.Store == "" {
		pd, err := privdir.Open("--dir", f.Dir)
		if err != nil {
			if rf := (*privdir.Refusal)(nil); errors.As(err, &rf) {
				return nil, kept.Errorf(kept.ErrBadRequest, "%s, so %s: %s", rf.What, nothing, rf.Fix)
			}
			return nil, kept.Errorf(kept.ErrBadRequest, "%w, so %s", err, nothing)
		}
		dir = pd.Path()
	}
	st, err := openStore(ctx, f.Store, dir, f.Flags, log)
	if err != nil {
		return nil, fmt.Errorf("%w, so %s", err, nothing)
	}
	return st, nil
}

// outcome prints what a command working beside the store did: with asJSON
// its report as JSON, or its error as printJSONError does; else, on
// success, the report through human. It returns the error.
func outcome[T any](w io.Writer, asJSON bool, human func(io.Writer, T) error) func(T, error) error {
	return func(rep T, err error) error {
		switch {
		case err != nil:
			if asJSON {
				printJSONError(w, err)
			}
			return err
		case asJSON:
			return printJSON(w, rep)
		}
		return human(w, rep)
	}
}
