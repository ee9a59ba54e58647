package keeper

import (
	"context"
	"encoding/json"
	"io"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// One stream of a moment's point: its archive written from the base's
// messages and the segments', those the moment keeps, and its backup.json.

// writeMomentStream writes one stream of a moment's point: its archive
// into data (the base's messages, then the segments', those the moment
// keeps) and its backup.json into meta.
func (k *storeView) writeMomentStream(ctx context.Context, pl *momentPlan, ms *momentStream, bases *openedArchive, data, meta io.Writer) error {
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
	if !pl.at.IsZero() {
		// The moment's time on the head's and consumers' entries, not the
		// time of writing: composed again for a restore, the archive must be
		// the same bytes (restore_at_composed.go).
		head.Stamp = pl.at.UnixNano()
	}
	var consumers []Position
	for _, p := range pl.positions {
		if p.Stream == ms.name {
			consumers = append(consumers, p)
		}
	}
	head.Consumers = len(consumers)
	if done, err := k.writeMomentPassed(ctx, pl, ms, bases, head, consumers, data, meta); done || err != nil {
		return err
	}
	// The head gives the messages and bytes before the first message, and
	// verification holds the archive to them: a first pass counts them.
	var n, size uint64
	var t0, t1 int64
	subjects := map[string]struct{}{}
	memory := busarchive.StoredInMemory(ms.config)
	count := func(m busarchive.ArchivedMessage) error {
		if n == 0 {
			t0 = m.Time
		}
		n, t1 = n+1, m.Time
		size += busarchive.StoredSize(memory, len(m.Subject), len(m.Header), len(m.Data))
		if len(subjects) < maxMomentSubjects {
			subjects[m.Subject] = struct{}{}
		}
		return nil
	}
	if err := k.scanMoment(ctx, pl, ms, bases, last, count); err != nil {
		return err
	}
	head.Msgs, head.Bytes = n, size
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
func (k *storeView) scanMoment(ctx context.Context, pl *momentPlan, ms *momentStream, bases *openedArchive, last uint64, fn func(busarchive.ArchivedMessage) error) error {
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

// maxMomentSubjects bounds the subjects a moment's stream counts for its
// backup.json (the count of a KV bucket's keys the evidence checks).
const maxMomentSubjects = 1 << 22
