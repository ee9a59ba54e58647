package keeper

import (
	"bytes"
	"context"
	"slices"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// What a moment keeps of a stream's messages: the first pass over the
// segments (rollups, the last messages of each subject), and the base's
// messages the per-subject limit drops.

// inMoment reports whether a message is of the moment by its time or
// sequence alone.
func (ms *momentStream) inMoment(pl *momentPlan, m busarchive.ArchivedMessage) bool {
	if ms.cut > 0 {
		return m.Seq <= ms.cut
	}
	return m.Time <= pl.at.UnixNano()
}

// isDeleted reports whether seq is gone by the moment: below the stream's
// first sequence, or recorded deleted.
func (ms *momentStream) isDeleted(seq uint64) bool {
	if seq < ms.first {
		return true
	}
	i, _ := slices.BinarySearchFunc(ms.deleted, seq, func(r [2]uint64, s uint64) int {
		if r[1] < s {
			return -1
		}
		if r[0] > s {
			return 1
		}
		return 0
	})
	return i < len(ms.deleted) && ms.deleted[i][0] <= seq && seq <= ms.deleted[i][1]
}

// firstPass notes, of a segment message of the moment, the rollups and
// the last sequences per subject.
func (ms *momentStream) firstPass(pl *momentPlan, m busarchive.ArchivedMessage) error {
	if !ms.inMoment(pl, m) {
		return nil
	}
	ms.last = max(ms.last, m.Seq) // the stream's last sequence then, deleted or not
	if ms.isDeleted(m.Seq) {
		return nil
	}
	switch rollup(m.Header) {
	case "all":
		ms.rollupAll = m.Seq
	case "sub":
		ms.rollupSub[m.Subject] = m.Seq
	}
	if ms.perSubject > 0 {
		l := append(ms.lastN[m.Subject], m.Seq)
		if int64(len(l)) > ms.perSubject {
			l = l[1:]
		}
		ms.lastN[m.Subject] = l
	}
	return nil
}

// countBase counts, when the per-subject limit is above one, the base's
// messages of each subject the segments hold fewer of than the limit, to
// drop the oldest that the limit removed.
func (ms *momentStream) countBase(ctx context.Context, base *openedArchive) error {
	if ms.perSubject <= 1 {
		return nil
	}
	need := map[string]int{}
	for subj, l := range ms.lastN {
		if int64(len(l)) < ms.perSubject {
			need[subj] = 0
		}
	}
	if len(need) == 0 {
		return nil
	}
	err := readStream(ctx, base, ms.name, func(m busarchive.ArchivedMessage) error {
		if n, ok := need[m.Subject]; ok && !ms.isDeleted(m.Seq) {
			need[m.Subject] = n + 1
		}
		return nil
	})
	for subj, n := range need {
		if over := n + len(ms.lastN[subj]) - int(ms.perSubject); over > 0 {
			ms.baseExcess[subj] = over
		}
	}
	return err
}

// rollup is the value of a Nats-Rollup header ("sub", "all"), or "".
func rollup(h []byte) string {
	i := bytes.Index(h, []byte("\r\nNats-Rollup:"))
	if i < 0 {
		return ""
	}
	v := h[i+len("\r\nNats-Rollup:"):]
	if j := bytes.Index(v, []byte("\r\n")); j >= 0 {
		v = v[:j]
	}
	return string(bytes.TrimSpace(v))
}
