package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// setAsideLogical sets aside the live values a logical restore overwrites:
// an aside whose stream entries are stream archives holding the live last
// message of each key that differs (for an object store, its meta and the
// chunks of its object), marked logical, with the keys that had no live
// message named absent. It is written, read back and verified whole, and
// the live streams checked to have taken no message meanwhile, before its
// aside.json (the commit mark) is written: only then is any key written.
// It returns nil when no key differs. On error nothing was written and no
// partial aside is left.
func (k *Keeper) setAsideLogical(ctx context.Context, r Request, pl *restorePlan) (_ *Aside, _ *busarchive.Report, err error) {
	lp := pl.logical
	if lp.keyCount() == 0 {
		return nil, nil, nil
	}
	if err := k.canReadOwn(); err != nil {
		return nil, nil, err
	}
	id, err := k.newAside(ctx, r.Module, r.Local)
	if err != nil {
		return nil, nil, err
	}
	rel := asideRel(id)
	placed := false
	defer func() {
		if !placed && err != nil {
			err = k.dropUnplaced(ctx, rel, err)
		}
	}()
	take := func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		return lp.stream(stream).writeAside(data, meta)
	}
	streams := lp.written()
	m, w, err := k.writeArchive(ctx, rel, streams, take, k.bus.ServerVersion(), 1,
		Progress{Verb: VerbRestore, Module: r.Module, Local: r.Local, Step: "aside"})
	if err != nil {
		return nil, nil, err
	}
	defer w.Abort()
	info, err := w.Commit(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("writing the set-aside copy to the store: %w", k.roomRefused(err, m.Bytes()))
	}
	a := &Aside{ID: id, Module: r.Module, Local: r.Local, Taken: k.now().UTC(), Caller: r.Caller, Why: r.Why,
		Reason: ReasonRestore, Point: pl.pointRel, Dir: rel, Streams: streamSums(m),
		ArchiveSize: info.Size, ArchiveSum: info.Sum, Sealing: k.sealingOf(w)}
	for i := range a.Streams {
		a.Streams[i].Logical, a.Streams[i].Absent = true, lp.stream(a.Streams[i].Name).absent()
	}
	a.Format = RecordFormatTails // a keeper before it would take these values for whole streams
	rep, err := k.checkAside(ctx, a, m)
	if err != nil {
		return nil, nil, err
	}
	if _, err := k.putJSON(ctx, recordKey(rel), a); err != nil { // the commit mark
		return nil, nil, fmt.Errorf("writing aside.json: %w", k.roomRefused(err, m.Bytes()))
	}
	placed = true
	if err := k.recordAside(ctx, a); err != nil {
		return nil, nil, err
	}
	return a, rep, nil
}

// stream is the plan's stream of that name.
func (lp *logicalPlan) stream(name string) *logicalStream {
	for _, ls := range lp.streams {
		if ls.name == name {
			return ls
		}
	}
	return &logicalStream{name: name}
}

// absent names the keys that differ and had no live message.
func (ls *logicalStream) absent() []string {
	var out []string
	for _, key := range ls.keys {
		if key.live == nil {
			out = append(out, key.subject)
		}
	}
	return out
}

// asideMessages are the live messages the stream's aside holds, in rising
// sequence order: each differing key's live last message, and the live
// chunks of each object's.
func (ls *logicalStream) asideMessages() []busarchive.ArchivedMessage {
	var out []busarchive.ArchivedMessage
	for _, key := range ls.keys {
		if key.live != nil {
			out = append(out, *key.live)
		}
	}
	for _, cs := range ls.liveChunks {
		out = append(out, cs...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// writeAside writes the stream's aside: its stream.arc.s2 into data and
// its backup.json into meta, closing both. The archive's state is the live
// stream's last sequence with the messages it holds, so the aside's check
// finds a stream that took a message meanwhile.
func (ls *logicalStream) writeAside(data, meta io.WriteCloser) error {
	defer data.Close()
	defer meta.Close()
	msgs := ls.asideMessages()
	head := busarchive.ArchiveHead{FirstSeq: ls.liveLast + 1, LastSeq: ls.liveLast, Msgs: uint64(len(msgs))}
	if len(msgs) > 0 {
		head.FirstSeq = msgs[0].Seq
	}
	for _, m := range msgs {
		head.Bytes += uint64(len(m.Subject) + len(m.Header) + len(m.Data))
	}
	sw, err := busarchive.NewStreamArchiveWriter(data, head)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := sw.Message(m); err != nil {
			sw.Close()
			return err
		}
	}
	if err := sw.Close(); err != nil {
		return err
	}
	if err := data.Close(); err != nil {
		return err
	}
	doc, err := json.Marshal(map[string]any{"config": ls.liveConfig, "state": map[string]any{
		"messages": head.Msgs, "bytes": head.Bytes, "first_seq": head.FirstSeq, "last_seq": head.LastSeq, "consumer_count": 0}})
	if err != nil {
		return err
	}
	if _, err := meta.Write(doc); err != nil {
		return err
	}
	return meta.Close()
}
