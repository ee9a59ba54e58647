package keeper

import (
	"context"
	"errors"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// How a logical restore uses a point's key index (snapshot_keyindex.go):
// the keys' last sequences and sums come from the index, not from a read
// of the archive; an object store's metas are read through it for the
// candidates only, and the values written (and the live chunks the point
// still holds) through it too, each message checked against the index.
// Without an index, or when it does not load, or when a message read
// through it is not what it recorded, the stream's archive is read whole,
// as before (restore_logical_diff.go).

// planLogicalStreamOf is planLogicalStream through the point's key index
// of the stream where it has one that loads; read whole again, without
// it, when a message read through it is not what it recorded.
func (k *Keeper) planLogicalStreamOf(ctx context.Context, arch *openedArchive, sm *busarchive.StreamManifest, scope *logicalScope, held *int) (*logicalStream, error) {
	ix, err := arch.KeyIndex(ctx, sm.Name)
	if err != nil {
		k.log.Warn("the point's key index of the stream does not load; the logical restore reads its archive whole", "stream", sm.Name, "err", err)
		ix = nil
	}
	before := *held
	ls, err := k.planLogicalStream(ctx, arch, sm, scope, ix, held)
	var re *busarchive.IndexedReadError
	if ix != nil && errors.As(err, &re) {
		k.log.Error("a message read through the point's key index is not what it recorded; the logical restore reads the stream's archive whole", "stream", sm.Name, "err", err)
		*held = before
		return k.planLogicalStream(ctx, arch, sm, scope, nil, held)
	}
	return ls, err
}

// indexedSource is sourceKeys as the key index ix records them.
func (ls *logicalStream) indexedSource(ix *busarchive.KeyIndex, held *int) (*sourceKeys, error) {
	src := &sourceKeys{head: &busarchive.ArchiveHead{FirstSeq: ix.FirstSeq, LastSeq: ix.LastSeq},
		last: map[string]*sourceKey{}, chunkSeqs: map[string][]uint64{}, ix: ix}
	for i, m := range ix.Messages {
		switch {
		case ls.isChunk(m.Subject):
			src.chunkSeqs[m.Subject] = append(src.chunkSeqs[m.Subject], m.Seq)
			*held += 8
		case ls.isKey(m.Subject):
			src.last[m.Subject] = &sourceKey{seq: m.Seq, sum: m.DataSum, gone: !ls.object && kvGone(m.Header), at: &ix.Messages[i]}
			*held += len(m.Subject) + 64
		}
	}
	return src, heldFits(*held)
}

// readMetas reads, through the key index, the metas of an object store's
// candidates that the point holds (a whole read has them all already).
func (ls *logicalStream) readMetas(ctx context.Context, arch *openedArchive, src *sourceKeys, cands []string, held *int) error {
	var ms []busarchive.IndexedMessage
	for _, s := range cands {
		if sk := src.last[s]; ls.object && sk != nil && sk.at != nil {
			ms = append(ms, *sk.at)
		}
	}
	return arch.ReadIndexed(ctx, src.ix, ms, func(m busarchive.ArchivedMessage) error {
		sk := src.last[m.Subject]
		sk.meta, sk.gone = &m, metaDeleted(m.Data)
		*held += len(m.Data)
		return heldFits(*held)
	})
}

// indexed is the messages of ix that readValues keeps.
func (vs *logicalValues) indexed(ix *busarchive.KeyIndex, lv *liveView) []busarchive.IndexedMessage {
	var out []busarchive.IndexedMessage
	for _, m := range ix.Messages {
		if _, ok := vs.wantSeq[m.Seq]; ok || vs.chunkOf[m.Subject] || (vs.liveOf[m.Subject] && liveSeq(lv.sd, m.Seq)) {
			out = append(out, m)
		}
	}
	return out
}
