package keeper

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/store"
)

// archiveFile is a store Writer as busarchive writes to it: Hold and
// Release pass through (the archive holds a data entry's tar header until it
// patches in the entry's size), and Sync is the store's Commit, made by the
// caller.
type archiveFile struct{ store.Writer }

func (archiveFile) Sync() error { return nil }

// streamSource feeds one stream's snapshot into an archive: its
// stream.arc.s2 into data and its backup.json into meta (the bus's
// Snapshot, or a nats backup directory's files).
type streamSource func(ctx context.Context, stream string, data, meta io.WriteCloser) error

// writeArchive writes each stream, as take gives it, up to parallel at once
// (see takeAtOnce), into a new archive at
// rel/bus.tar (or, when the keeper encrypts, rel/bus.tar.age), hashing as it
// goes, and returns its manifest and its Writer, not yet committed: the
// caller commits it (or aborts it) when the order of steps allows, and
// records k.sealingOf(the Writer). serverVersion is recorded in the
// manifest; each of amend is given the writer before its commit, to
// record in the manifest what the takes learnt (snapshot_cut.go).
func (k *Keeper) writeArchive(ctx context.Context, rel string, streams []string, take streamSource, serverVersion string, parallel int, p Progress,
	amend ...func(*busarchive.Writer) error) (*busarchive.Manifest, store.Writer, error) {
	return k.writeArchiveInto(ctx, k.store, k.seal != nil, rel, streams, take, serverVersion, parallel, p, amend...)
}

// writeArchiveInto is writeArchive into st, encrypted when seal (the
// keeper's Config.Seal; a composed moment's archive, written nowhere, is never
// encrypted).
func (k *Keeper) writeArchiveInto(ctx context.Context, st store.Store, seal bool, rel string, streams []string, take streamSource, serverVersion string, parallel int, p Progress,
	amend ...func(*busarchive.Writer) error) (*busarchive.Manifest, store.Writer, error) {
	key := archiveKey(rel)
	if seal {
		key = rel + "/" + sealedName
	}
	sw, err := st.Create(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if seal {
		// Encrypted in the same pass: the age header now, each chunk as it
		// fills (see agecrypt), the store seeing only ciphertext.
		enc, err := k.seal.Create(sw)
		if err != nil {
			sw.Abort()
			return nil, nil, fmt.Errorf("encrypting the archive: %w", err)
		}
		sw = enc
	}
	ok := false
	defer func() {
		if !ok {
			sw.Abort()
		}
	}()
	failed := &storeFailure{Writer: sw} // a store's refusal, told as such whatever the bus's snapshot says of it
	w := busarchive.NewWriter(archiveFile{failed}, busarchive.WriterInfo{
		KeeperVersion: k.version,
		ServerVersion: serverVersion,
		Created:       k.now().UTC(),
	})
	var before int64
	if parallel > 1 && len(streams) > 1 && k.spoolDir != "" {
		before, err = k.takeAtOnce(ctx, w, streams, take, parallel, &p)
	} else {
		before, err = takeInTurn(ctx, w, streams, take, &p)
	}
	if err != nil {
		return nil, nil, k.roomRefused(failed.of(err), p.BytesTotal)
	}
	if before >= releaseAfter {
		defer debug.FreeOSMemory()
	}
	for _, a := range amend {
		if err := a(w); err != nil {
			return nil, nil, fmt.Errorf("commit archive: %w", err)
		}
	}
	m, err := w.Commit()
	if err != nil {
		return nil, nil, k.roomRefused(fmt.Errorf("commit archive: %w", failed.of(err)), p.BytesTotal)
	}
	p.StreamsDone, p.Stream = len(streams), ""
	progressFrom(ctx)(p)
	ok = true
	return m, sw, nil
}
