package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/nats-keeper/nats-keeper/internal/privdir"
	"github.com/nats-keeper/nats-keeper/keeper"
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
	dir := e.Getenv("NATS_KEEPER_DIR")
	if dir == "" {
		dir = "./nats-keeper-data"
	}
	fs.StringVar(&f.Dir, "dir", dir, "the keeper's directory, its store unless --store says otherwise (default $NATS_KEEPER_DIR, else ./nats-keeper-data)")
	fs.StringVar(&f.Store, "store", e.Getenv("NATS_KEEPER_STORE"), "the keeper's store: file:///path (default: --dir), "+
		"nats://host:port/bucket or s3://bucket/prefix (default $NATS_KEEPER_STORE)")
	addStoreFlags(fs, &f.Flags)
}

// open opens the keeper's store; a directory store under --dir is checked
// to be private first, as serve checks it. nothing ends the sentences.
func (f keeperStoreFlags) open(ctx context.Context, log *slog.Logger, nothing string) (store.Store, error) {
	dir := f.Dir
	if f.Store == "" {
		pd, err := privdir.Open("--dir", f.Dir)
		if err != nil {
			if rf := (*privdir.Refusal)(nil); errors.As(err, &rf) {
				return nil, keeper.Errorf(keeper.ErrBadRequest, "%s, so %s: %s", rf.What, nothing, rf.Fix)
			}
			return nil, keeper.Errorf(keeper.ErrBadRequest, "%w, so %s", err, nothing)
		}
		dir = pd.Path()
	}
	st, err := openStore(ctx, f.Store, dir, f.Flags, log)
	if err != nil {
		return nil, fmt.Errorf("%w, so %s", err, nothing)
	}
	return st, nil
}
