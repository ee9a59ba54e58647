package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// writeMoment writes and commits the point of a moment, fingerprint fp, at
// the chain's form: each stream's archive made of the base's messages then
// the segments', as planned, the positions those of the sample.
func (k *Keeper) writeMoment(ctx context.Context, r Request, ch *chain, base *Point, pl *momentPlan, fp string) (*Point, error) {
	pr := Request{Module: r.Module, Local: r.Local, Form: ch.form, Fingerprint: fp, CatchUp: base.CatchUp, Caller: r.Caller, Why: "the moment of: " + r.Why}
	rel := pointRel(r.Module, r.Local, ch.form, fp)
	// Under the kept data's lease: two verbs that make the same moment at
	// once would each commit its archive under the other's record.
	ctx, release, err := k.lock(ctx, VerbRestore, pr)
	if err != nil {
		return nil, err
	}
	defer release()
	if rec, err := k.index.Get(ctx, pointKey(r.Module, r.Local, ch.form, fp)); err == nil {
		var p Point
		if err := decodeRecord("point", rec, &p); err == nil {
			return &p, nil // made meanwhile
		}
	}
	bases, err := k.openArchive(ctx, base.Dir, base)
	if err != nil {
		return nil, fmt.Errorf("opening the base %s: %w", base.Dir, err)
	}
	defer bases.Close()
	take := func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		defer data.Close()
		defer meta.Close()
		return k.writeMomentStream(ctx, pl, pl.streams[stream], bases, data, meta)
	}
	names := make([]string, 0, len(base.Streams))
	for _, s := range base.Streams {
		names = append(names, s.Name)
	}
	e := k.prepareReplace(ctx, pr, rel)
	defer e.abandon(ctx)
	m, w, err := k.writeArchive(ctx, rel, names, take, k.bus.ServerVersion(), 1, Progress{Verb: VerbRestore, Module: r.Module, Local: r.Local, Step: "moment"})
	if err != nil {
		return nil, fmt.Errorf("writing the point of the moment: %w, so no point was written", err)
	}
	defer w.Abort()
	var failed error
	fail := func(err error) (*Reply, error) { failed = err; return nil, err }
	rep, err := k.commitPoint(ctx, VerbRestore, pr, rel, m, w, nil, slices.Clone(pl.positions), e, fail, func(p *Point) string {
		return fmt.Sprintf("Made the point of a moment %s: %d stream(s), %d message(s).", k.abs(rel), len(p.Streams), totalMessages(p.Streams))
	}, func(p *Point) {
		at := pl.at
		p.At, p.Base = &at, base.Dir
	})
	if err != nil {
		return nil, err
	}
	if failed != nil {
		return nil, failed
	}
	return rep.Point, nil
}

// writeMomentStream writes one stream of a moment's point: its archive
// into data (the base's messages, then the segments', those the moment
// keeps) and its backup.json into meta.
func (k *Keeper) writeMomentStream(ctx context.Context, pl *momentPlan, ms *momentStream, bases *openedArchive, data, meta io.Writer) error {
	first, last := ms.first, ms.last
	if ms.cut > 0 {
		last = min(last, ms.cut)
	}
	if first > last+1 {
		last = first - 1
	}
	head := busarchive.ArchiveHead{FirstSeq: first, LastSeq: last}
	if first == 0 { // a stream that held nothing at its base
		first = 1
		head = busarchive.ArchiveHead{FirstSeq: first, LastSeq: max(last, first-1)}
	}
	// The head gives the messages and bytes before the first message, and
	// verification holds the archive to them: a first pass counts them.
	var n, size uint64
	var t0, t1 int64
	subjects := map[string]struct{}{}
	memory := storedInMemory(ms.config)
	count := func(m busarchive.ArchivedMessage) error {
		if n == 0 {
			t0 = m.Time
		}
		n, t1 = n+1, m.Time
		size += storedSize(memory, m.Subject, m.Header, m.Data)
		if len(subjects) < maxMomentSubjects {
			subjects[m.Subject] = struct{}{}
		}
		return nil
	}
	if err := k.scanMoment(ctx, pl, ms, bases, last, count); err != nil {
		return err
	}
	head.Msgs, head.Bytes = n, size
	var consumers []Position
	for _, p := range pl.positions {
		if p.Stream == ms.name {
			consumers = append(consumers, p)
		}
	}
	head.Consumers = len(consumers)
	w, err := busarchive.NewStreamArchiveWriter(data, head)
	if err != nil {
		return err
	}
	for _, p := range consumers {
		entry, err := momentConsumer(p)
		if err != nil {
			return err
		}
		if err := w.Consumer(p.Consumer, entry); err != nil {
			return err
		}
	}
	if err := k.scanMoment(ctx, pl, ms, bases, last, w.Message); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	doc, err := tailMeta(ms.config, head, t0, t1, uint64(len(subjects)))
	if err != nil {
		return err
	}
	_, err = meta.Write(doc)
	return err
}

// scanMoment calls fn with each message of ms's stream at the moment, up
// to last: the base's, then the segments', in order.
func (k *Keeper) scanMoment(ctx context.Context, pl *momentPlan, ms *momentStream, bases *openedArchive, last uint64, fn func(busarchive.ArchivedMessage) error) error {
	seen := map[string]int{}
	put := func(fromBase bool) func(busarchive.ArchivedMessage) error {
		return func(m busarchive.ArchivedMessage) error {
			if m.Seq > last || !ms.keep(pl, m, fromBase, seen) {
				return nil
			}
			return fn(m)
		}
	}
	if err := readStream(ctx, bases, ms.name, put(true)); err != nil {
		return err
	}
	segPut := put(false)
	return k.eachSegmentMessage(ctx, pl, ms, func(_ *momentPlan, m busarchive.ArchivedMessage) error { return segPut(m) })
}

// maxMomentSubjects bounds the subjects a moment's stream counts for its
// backup.json (the count of a KV bucket's keys the evidence checks).
const maxMomentSubjects = 1 << 22

// storedInMemory reports whether a stream's configuration keeps it in
// memory.
func storedInMemory(config []byte) bool {
	var c struct {
		Storage string `json:"storage"`
	}
	_ = json.Unmarshal(config, &c)
	return c.Storage == "memory"
}

// storedSize is the bytes the server counts for one message, as
// nats-server 2.15 counts them (filestore.go fileStoreMsgSizeRaw,
// memstore.go memStoreMsgSizeRaw): a file stream's record with its length,
// sequence, time, subject length, header length when there is a header,
// and hash; a memory stream's sequence and time.
func storedSize(memory bool, subject string, header, data []byte) uint64 {
	n := uint64(len(subject) + len(header) + len(data))
	switch {
	case memory:
		return n + 16
	case len(header) == 0:
		return n + 30
	}
	return n + 34
}

// momentConsumer is the archive entry of a sampled consumer: its
// configuration as the server held it, and a state delivered and
// acknowledged up to its sampled ack floor, as a stream's snapshot gives
// a consumer with nothing pending.
func momentConsumer(p Position) ([]byte, error) {
	type seqs struct {
		Consumer uint64 `json:"consumer_seq"`
		Stream   uint64 `json:"stream_seq"`
	}
	at := seqs{p.AckFloor, p.AckFloor}
	return json.Marshal(struct {
		Config json.RawMessage `json:"config"`
		State  struct {
			Delivered seqs `json:"delivered"`
			AckFloor  seqs `json:"ack_floor"`
		} `json:"state"`
	}{Config: p.Config, State: struct {
		Delivered seqs `json:"delivered"`
		AckFloor  seqs `json:"ack_floor"`
	}{at, at}})
}
