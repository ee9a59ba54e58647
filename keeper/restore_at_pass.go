package keeper

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// The common case of a moment: messages appended after the base, none of
// the base's dropped. Such a stream's archive is the base's, its s2
// chunks passed through undecoded (busarchive.SpliceStreamArchive), with
// a new head and the segments' messages after it: no pass decodes the
// base, and its counts are its own head's plus the segments'.

// baseState is a base stream's state, as its backup.json gives it.
type baseState struct {
	Msgs      uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"first_seq"`
	FirstTime time.Time `json:"first_ts"`
	LastSeq   uint64    `json:"last_seq"`
	LastTime  time.Time `json:"last_ts"`
	Subjects  uint64    `json:"num_subjects"`
}

// writeMomentPassed writes ms's stream of the moment into data and meta
// with the base's messages passed through, when the moment keeps every
// one of them, and reports whether it did; it writes nothing when not.
func (k *storeView) writeMomentPassed(ctx context.Context, pl *momentPlan, ms *momentStream, bases *openedArchive, head busarchive.ArchiveHead, consumers []Position, data, meta io.Writer) (bool, error) {
	bs, err := readBaseState(bases, ms.name)
	if err != nil || !ms.keepsAllOf(pl, bs, head.LastSeq) {
		return false, nil // the general path reads the base as it is
	}
	var n, size uint64
	var t1 int64
	subjects := map[string]struct{}{}
	memory := busarchive.StoredInMemory(ms.config)
	seen := map[string]int{}
	each := func(put func(busarchive.ArchivedMessage) error) error {
		return k.eachSegmentMessage(ctx, pl, ms, func(_ *momentPlan, m busarchive.ArchivedMessage) error {
			if m.Seq <= bs.LastSeq || m.Seq > head.LastSeq || !ms.keep(pl, m, false, seen) {
				return nil
			}
			return put(m)
		})
	}
	err = each(func(m busarchive.ArchivedMessage) error {
		n, t1, size = n+1, m.Time, size+busarchive.StoredSize(memory, len(m.Subject), len(m.Header), len(m.Data))
		subjects[m.Subject] = struct{}{}
		return nil
	})
	if err != nil {
		return false, err
	}
	kind := strings.HasPrefix(ms.name, "KV_") || strings.HasPrefix(ms.name, "OBJ_")
	if n > 0 && kind {
		return false, nil // its count of subjects (keys, objects) needs the base's subjects read
	}
	head.Msgs, head.Bytes = bs.Msgs+n, bs.Bytes+size
	entries := make([]busarchive.NamedEntry, 0, len(consumers))
	for _, p := range consumers {
		e, err := momentConsumer(p)
		if err != nil {
			return false, err
		}
		entries = append(entries, busarchive.NamedEntry{Name: p.Consumer, Entry: e})
	}
	r, err := bases.CheckedStreamData(ctx, ms.name)
	if err != nil {
		return false, err
	}
	defer r.Close()
	var baseSize int64 // the base's data entry: the splice holds its chunks back only near its end
	if sm := bases.Manifest().Stream(ms.name); sm != nil && len(sm.Entries) > 0 {
		baseSize = sm.Entries[0].Size
	}
	if err := busarchive.SpliceStreamArchive(data, head, entries, r, baseSize, each); err != nil {
		return false, err
	}
	if _, err := io.Copy(io.Discard, r); err != nil { // to its end, so its checksum is checked
		return false, err
	}
	t0 := bs.FirstTime.UnixNano()
	if bs.Msgs == 0 || bs.FirstTime.IsZero() {
		t0 = 0
	}
	if n == 0 && !bs.LastTime.IsZero() {
		t1 = bs.LastTime.UnixNano()
	}
	var subj uint64 // a plain stream's subjects, base's and segments' overlapping, are not counted
	if n == 0 {
		subj = bs.Subjects
	}
	doc, err := tailMeta(ms.config, head, t0, t1, subj)
	if err != nil {
		return false, err
	}
	_, err = meta.Write(doc)
	return true, err
}

// keep reports whether a message is in the stream at the moment; fromBase
// says it is read from the base (seen counts the base's messages per
// subject for the per-subject limit).
func (ms *momentStream) keep(pl *momentPlan, m busarchive.ArchivedMessage, fromBase bool, seen map[string]int) bool {
	if !ms.inMoment(pl, m) || ms.isDeleted(m.Seq) {
		return false
	}
	var l []uint64
	if ms.perSubject > 0 {
		l = ms.lastN[m.Subject]
		if fromBase {
			// Counted as countBase counts: every base message of the
			// subject not deleted, whatever else drops it.
			if int64(len(l)) >= ms.perSubject {
				return false
			}
			if over := ms.baseExcess[m.Subject]; over > 0 && seen[m.Subject] < over {
				seen[m.Subject]++
				return false
			}
		}
	}
	if m.Seq < ms.rollupAll {
		return false
	}
	if s, ok := ms.rollupSub[m.Subject]; ok && m.Seq < s {
		return false
	}
	if ms.maxAge > 0 && ms.cut == 0 && m.Time < pl.at.Add(-ms.maxAge).UnixNano() {
		return false
	}
	if ms.perSubject > 0 && !fromBase {
		return len(l) > 0 && m.Seq >= l[0]
	}
	return true
}

// readBaseState is stream's state in the base's backup.json.
func readBaseState(bases *openedArchive, stream string) (*baseState, error) {
	r, err := bases.StreamMeta(stream)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	doc, err := io.ReadAll(io.LimitReader(r, busarchive.MaxMetaSize))
	if err != nil {
		return nil, err
	}
	var m struct {
		State baseState `json:"state"`
	}
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	return &m.State, nil
}

// keepsAllOf reports whether the moment keeps every message of the base's
// stream, whose state is bs, below last: none is recorded deleted (a gap
// the base already had is no message), below the stream's first sequence
// then, rolled up, over the per-subject limit or the age limit, or after
// the moment.
func (ms *momentStream) keepsAllOf(pl *momentPlan, bs *baseState, last uint64) bool {
	if bs.Msgs == 0 {
		return bs.LastSeq <= last
	}
	switch {
	case bs.LastSeq > last, ms.first > bs.FirstSeq, ms.rollupAll != 0, len(ms.rollupSub) > 0:
		return false
	case ms.perSubject > 0 && len(ms.lastN) > 0:
		return false
	case ms.cut == 0 && (bs.LastTime.IsZero() || bs.LastTime.After(pl.at)):
		return false
	case ms.maxAge > 0 && ms.cut == 0 && (bs.FirstTime.IsZero() || bs.FirstTime.Before(pl.at.Add(-ms.maxAge))):
		return false
	}
	// Deletes recorded inside the base's range are its own gaps (the
	// chain's first segment lists them all) or messages deleted since: it
	// keeps them all only when the ones listed there are exactly as many
	// as its gaps, and every gap is listed.
	var listed uint64
	for _, d := range ms.deleted {
		if lo, hi := max(d[0], bs.FirstSeq), min(d[1], bs.LastSeq); lo <= hi {
			listed += hi - lo + 1
		}
	}
	return listed == 0 || (ms.listsBase && listed == bs.LastSeq-bs.FirstSeq+1-bs.Msgs)
}
