package keeper

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
)

// A point of a KV bucket or an object store records a key index of each
// such stream (busarchive's KeyIndex: where each key's last message, each
// object's meta and every chunk lies in the archive, with their sums),
// built as the stream's snapshot passes into the archive, on a goroutine
// of its own behind a bounded queue. Once the archive is committed, each
// index is written as its own object beside it (keys-<stream>.idx, sealed
// as the archive is: keys-<stream>.idx.age), before point.json, which
// names it with its size and checksum. A logical restore reads the index
// and only the archive's bytes holding the values it writes; a point
// without one (older points, imports, asides, an index over its bounds)
// is read whole as before.

// keyIndexes are the key indexes one snapshot-kept builds: which streams
// get one (the KV buckets and object stores), and the index of each
// stream's last snapshot (an archive written again after the bus went away
// takes its streams again).
type keyIndexes struct {
	log  *slog.Logger
	keep map[string]func(string) busarchive.KeepMode
	mu   sync.Mutex
	by   map[string]*busarchive.KeyIndex
}

// newKeyIndexes indexes each of live that is a KV bucket or object store.
func newKeyIndexes(live []StreamInfo, log *slog.Logger) *keyIndexes {
	ki := &keyIndexes{log: log, keep: map[string]func(string) busarchive.KeepMode{}, by: map[string]*busarchive.KeyIndex{}}
	for _, s := range live {
		if bucket, object, ok := logicalKind(s.Name, s.Subjects); ok {
			ki.keep[s.Name] = keepOf(bucket, object)
		}
	}
	return ki
}

// keepOf says what a key index of a KV bucket or object store records:
// each key's last message (a KV key's, an object's meta), and every chunk
// of an object.
func keepOf(bucket string, object bool) func(string) busarchive.KeepMode {
	keys, chunks := "$KV."+bucket+".", ""
	if object {
		keys, chunks = "$O."+bucket+".M.", "$O."+bucket+".C."
	}
	return func(subject string) busarchive.KeepMode {
		switch {
		case strings.HasPrefix(subject, keys):
			return busarchive.KeepLast
		case chunks != "" && strings.HasPrefix(subject, chunks):
			return busarchive.KeepEvery
		}
		return busarchive.KeepNone
	}
}

// take is take with the data of each indexed stream teed into its
// Indexer; once the snapshot succeeded, its index is kept (none when it
// could not be built, which is logged: that point's stream is read whole).
func (ki *keyIndexes) take(take streamSource) streamSource {
	return func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		keep := ki.keep[stream]
		if keep == nil {
			return take(ctx, stream, data, meta)
		}
		x := busarchive.NewIndexer(stream, keep)
		err := take(ctx, stream, indexTee{WriteCloser: data, x: x}, meta)
		x.Close()
		if err != nil {
			x.Stop()
			ki.set(stream, nil)
			return err
		}
		ix, err := x.Index()
		if err != nil {
			ki.log.Info("the point records no key index of the stream; a logical restore of it reads its archive whole", "stream", stream, "why", err)
		}
		ki.set(stream, ix)
		return nil
	}
}

func (ki *keyIndexes) set(stream string, ix *busarchive.KeyIndex) {
	ki.mu.Lock()
	defer ki.mu.Unlock()
	ki.by[stream] = ix
}

func (ki *keyIndexes) of(stream string) *busarchive.KeyIndex {
	if ki == nil {
		return nil
	}
	ki.mu.Lock()
	defer ki.mu.Unlock()
	return ki.by[stream]
}

// indexTee writes everything to its WriteCloser and a copy to the Indexer.
type indexTee struct {
	io.WriteCloser
	x *busarchive.Indexer
}

func (t indexTee) Write(p []byte) (int, error) {
	t.x.Write(p)
	return t.WriteCloser.Write(p)
}

// putKeyIndexes writes, beside the archive at rel just committed (its
// manifest m), the key index of each stream of sums that has one and
// names it in its sum. An index that does not fit the archive's data entry,
// or that could not be written, is left out (logged): the point is whole
// without it.
func (k *Keeper) putKeyIndexes(ctx context.Context, rel string, m *busarchive.Manifest, ki *keyIndexes, sums []StreamSum) {
	for i := range sums {
		ix := ki.of(sums[i].Name)
		if ix == nil {
			continue
		}
		sm := m.Stream(ix.Stream)
		if sm == nil || len(sm.Entries) == 0 || sm.Entries[0].Size != ix.Size {
			k.log.Warn("the key index built does not fit the archive's data entry; the point records none", "stream", ix.Stream, "indexed", ix.Size)
			continue
		}
		ref, err := k.putKeyIndex(ctx, rel, ix)
		if err != nil {
			k.log.Warn("the key index was not written; the point records none, and a logical restore of it reads its archive whole", "stream", ix.Stream, "err", err)
			continue
		}
		sums[i].KeyIndex = ref
	}
}

// putKeyIndex writes one key index at rel, sealed when the keeper
// encrypts, and returns its record.
func (k *Keeper) putKeyIndex(ctx context.Context, rel string, ix *busarchive.KeyIndex) (*kept.KeyIndex, error) {
	data, err := ix.Encode()
	if err != nil {
		return nil, err
	}
	name := layout.KeyIndexName(ix.Stream, k.seal != nil)
	w, err := k.store.Create(ctx, rel+"/"+name)
	if err != nil {
		return nil, err
	}
	if k.seal != nil {
		enc, err := k.seal.Create(w)
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("encrypting it: %w", err)
		}
		w = enc
	}
	defer w.Abort()
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	info, err := w.Commit(ctx)
	if err != nil {
		return nil, err
	}
	return &kept.KeyIndex{Object: name, Size: info.Size, Sum: info.Sum}, nil
}

// dropUnnamedKeyIndexes removes the key indexes at rel that point p does
// not name: an earlier point's of the same place, set aside whole before
// p was committed.
func (k *Keeper) dropUnnamedKeyIndexes(ctx context.Context, rel string, p *Point) error {
	objs, err := k.store.List(ctx, rel+"/")
	if err != nil {
		return err
	}
	named := map[string]bool{}
	for _, s := range p.Streams {
		if s.KeyIndex != nil {
			named[s.KeyIndex.Object] = true
		}
	}
	for _, o := range objs {
		if name := strings.TrimPrefix(o.Key, rel+"/"); layout.IsKeyIndexName(name) && !named[name] {
			if err := k.store.Delete(ctx, o.Key); err != nil {
				return fmt.Errorf("removing %s, which point.json does not name: %w", k.abs(o.Key), err)
			}
		}
	}
	return nil
}
