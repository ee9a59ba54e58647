package keeper

import (
	"context"
	"log/slog"

	"github.com/nats-keeper/nats-keeper/agecrypt"
	"github.com/nats-keeper/nats-keeper/keeper/archives"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/store"
)

// storeView is what reads a keeper's store and nothing else: records,
// capture chains, archives, and the moments made from a chain. It needs no
// bus, index or acts, so a command that works beside the store (export)
// reads through it where no keeper runs (ComposeMoment). A Keeper embeds
// it.
type storeView struct {
	store  store.Store
	unseal *agecrypt.Opener // decrypts sealed archives; nil opens plain ones only
	log    *slog.Logger
	// baseRecord reads the record of a chain's base point (its taking is
	// all listChains reads of it): a keeper's index, or the store itself.
	baseRecord func(ctx context.Context, module, local string, form int, fp string) ([]byte, error)
}

// storeRecord reads the record of the point module/local f<form>-<fp>
// from the store (point.json), where no index is at hand.
func (k *storeView) storeRecord(ctx context.Context, module, local string, form int, fp string) ([]byte, error) {
	return k.readSmall(ctx, recordKey(pointRel(module, local, form, fp)), layout.MaxRecordSize)
}

// openStored opens the archive of the point, aside or segment at rel as
// archives.Open does, decrypting with the view's identity. rec is never an
// incremental point (Keeper.openArchive makes its moment's point first).
func (k *storeView) openStored(ctx context.Context, rel string, rec *Point) (*openedArchive, error) {
	return archives.Open(ctx, k.store, rel, rec, k.abs(archiveKeyOf(rel, rec)), k.unseal)
}
