package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// The prefix test of one stream (changes.md, Words): the point is a prefix
// of the live stream when every message it holds is still live with the
// same sequence — the same first sequence, the live deleted set inside the
// point's first..last equal to the point's own gaps, a last sequence not
// below the point's — and the configuration differs only in fields a
// stream update can set back. Messages are immutable, so the same sequence
// is the same message. It reads the point's manifest and the live
// stream's details; the point's archive only when the point has gaps of
// its own (its messages are fewer than its sequences), to learn them.

// prefixOf is what the prefix test found of one stream of the point.
type prefixOf struct {
	prefix bool
	// why says why it is not a prefix, as the end of "full: …" ("12
	// messages of the point were deleted since").
	why string
	// removed is how many of the point's messages are no longer live,
	// when known.
	removed uint64
	// The tail: the live messages after the point's last sequence, from
	// tailFrom to tailTo (the live last sequence), tailCount of them,
	// about tailBytes.
	tailFrom, tailTo     uint64
	tailCount, tailBytes uint64
	// config names the configuration fields that differ; back is the
	// configuration a stream update sets back (nil when none differs).
	config []string
	back   json.RawMessage
	// unsure: the live deleted sequences inside the point's range, as
	// many as the point's own gaps, still to be compared with them
	// (confirm); nil when there is nothing to compare.
	unsure []uint64
}

// confirm compares the live deleted sequences inside the point's range
// with the point's own gaps, read from its archive, when checkPrefix left
// them unsure. Its error says only that the archive could not be read.
func (p *prefixOf) confirm(ctx context.Context, a *openedArchive, sm *busarchive.StreamManifest) error {
	if p.unsure == nil {
		return nil
	}
	own, err := pointGaps(ctx, a, sm, uint64(len(p.unsure)))
	if err != nil {
		return err
	}
	if !slices.Equal(own, p.unsure) {
		p.prefix, p.removed = false, 0
		p.why = "the stream's deleted sequences inside the point's range are not the point's own (the stream was made again since)"
	}
	p.unsure = nil
	return nil
}

// maxPointGaps bounds the gaps of its own a point's stream may hold for
// the prefix test to read them; a point with more is taken as no prefix.
const maxPointGaps = 1 << 20

// checkPrefix runs the prefix test of the point's stream sm against the
// live stream d, on their states; a point with gaps of its own is then
// confirmed against its archive (confirm).
func checkPrefix(sm *busarchive.StreamManifest, d *StreamDetail) *prefixOf {
	st := sm.Span() // a stream cut: up to the first message it left out
	p := &prefixOf{}
	if d.LastSeq < st.LastSeq {
		p.why = fmt.Sprintf("the stream's last sequence %s is below the point's %s (it was made again or purged)", count(d.LastSeq), count(st.LastSeq))
		return p
	}
	p.tailFrom, p.tailTo = st.LastSeq+1, d.LastSeq
	liveIn := deletedIn(d.Deleted, st.FirstSeq, st.LastSeq)
	switch {
	case st.Msgs == 0:
		// The point holds nothing: every live message must be after it.
		if d.Messages > 0 && d.FirstSeq <= st.LastSeq {
			p.removed = 0
			p.why = fmt.Sprintf("the stream holds messages at or below the point's last sequence %s, which the point did not hold", count(st.LastSeq))
			return p
		}
	case d.FirstSeq != st.FirstSeq:
		p.removed = gone(st, d)
		p.why = fmt.Sprintf("%s of the point %s removed since (the first sequence is now %s, the point's was %s)",
			messages(p.removed), wereOf(p.removed), count(d.FirstSeq), count(st.FirstSeq))
		return p
	default:
		gaps := st.LastSeq - st.FirstSeq + 1 - st.Msgs
		if uint64(len(liveIn)) < gaps {
			p.why = fmt.Sprintf("the stream has fewer deleted sequences inside the point's range (%s) than the point had (%s)", count(uint64(len(liveIn))), count(gaps))
			return p
		}
		if extra := uint64(len(liveIn)) - gaps; extra > 0 {
			p.removed = extra
			p.why = fmt.Sprintf("%s of the point %s deleted since", messages(p.removed), wereOf(p.removed))
			return p
		}
		// As many deleted sequences as the point's gaps: the same ones,
		// unless the stream was made again; the point's archive tells
		// (confirm), read only when the stream would get delta.
		if gaps > 0 {
			p.unsure = liveIn
		}
	}
	if d.Messages < st.Msgs {
		p.why = fmt.Sprintf("the stream holds %s, fewer than the point's %s", messages(d.Messages), count(st.Msgs))
		return p
	}
	p.tailCount = d.Messages - st.Msgs
	if d.Bytes > st.Bytes {
		p.tailBytes = d.Bytes - st.Bytes
	}
	var err error
	if p.config, p.back, err = configBack(sm.Config.Raw, d.Config); err != nil {
		p.why = err.Error()
		return p
	}
	p.prefix = true
	return p
}

// deletedIn is the part of the sorted set del inside first..last.
func deletedIn(del []uint64, first, last uint64) []uint64 {
	lo := sort.Search(len(del), func(i int) bool { return del[i] >= first })
	hi := sort.Search(len(del), func(i int) bool { return del[i] > last })
	return del[lo:hi]
}

// gone is how many of the point's messages lie below the live first
// sequence d.FirstSeq (when it moved up), as far as the states tell.
func gone(st busarchive.StreamState, d *StreamDetail) uint64 {
	if d.FirstSeq <= st.FirstSeq {
		return 0
	}
	if d.FirstSeq > st.LastSeq {
		return st.Msgs
	}
	return min(d.FirstSeq-st.FirstSeq, st.Msgs)
}

// pointGaps reads the sequences the point's stream skips inside its own
// first..last, from its archive (checked against its manifest as read),
// at most gaps of them (the state says how many).
func pointGaps(ctx context.Context, a *openedArchive, sm *busarchive.StreamManifest, gaps uint64) ([]uint64, error) {
	if gaps > maxPointGaps {
		return nil, fmt.Errorf("the point's stream %s skips %s sequences of its own, more than the %s the prefix test reads", sm.Name, count(gaps), count(maxPointGaps))
	}
	r, err := a.CheckedStreamData(ctx, sm.Name)
	if err != nil {
		return nil, fmt.Errorf("reading the point's stream %s: %w", sm.Name, err)
	}
	defer r.Close()
	out := make([]uint64, 0, gaps)
	span := sm.Span()
	next := span.FirstSeq
	_, err = busarchive.ReadStreamArchive(r, nil, func(m busarchive.ArchivedMessage) error {
		for ; next < m.Seq && next <= span.LastSeq; next++ {
			if uint64(len(out)) == gaps {
				return fmt.Errorf("it skips more sequences than its state says (%s)", count(gaps))
			}
			out = append(out, next)
		}
		next = m.Seq + 1
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the point's stream %s: %w", sm.Name, err)
	}
	return out, nil
}

// Stream configuration fields a stream update cannot set back from the
// live value to the point's (nats-server's configUpdateCheck), or that a
// delta cannot work under; each is checked in configBack.
var (
	sameFields = []string{"name", "storage", "mirror", "persist_mode", "allow_msg_counter"}
	// keptAsLive are fields a delta leaves as the live stream has them:
	// where the stream is placed is not what a rollback sets back.
	keptAsLive = []string{"replicas", "placement"}
)

// configBack compares the point's configuration with the live one. It
// returns the fields that differ and the configuration a stream update
// sets back (the point's, with the live placement and replicas; nil when
// nothing differs), or an error that says why an update cannot set it
// back, as the end of "full: …".
func configBack(point, live json.RawMessage) ([]string, json.RawMessage, error) {
	var pc, lc map[string]any
	if err := json.Unmarshal(point, &pc); err != nil || pc == nil {
		return nil, nil, fmt.Errorf("the point's configuration does not read (%v)", err)
	}
	if err := json.Unmarshal(live, &lc); err != nil || lc == nil {
		return nil, nil, fmt.Errorf("the live configuration does not read (%v)", err)
	}
	plain(pc)
	plain(lc)
	if on(lc, "sealed") {
		return nil, nil, fmt.Errorf("the stream is sealed, so its messages cannot be deleted")
	}
	if on(lc, "deny_delete") {
		return nil, nil, fmt.Errorf("the stream denies message deletes (deny_delete, as every KV bucket's stream does)")
	}
	if lc["mirror"] != nil {
		return nil, nil, fmt.Errorf("the stream is a mirror, whose messages are its upstream's")
	}
	var fixed []string
	for _, f := range sameFields {
		if !reflect.DeepEqual(pc[f], lc[f]) {
			fixed = append(fixed, f)
		}
	}
	for _, f := range []string{"deny_purge", "allow_msg_ttl", "allow_msg_schedules"} {
		if on(lc, f) && !on(pc, f) {
			fixed = append(fixed, f)
		}
	}
	if pr, lr := str(pc, "retention"), str(lc, "retention"); pr != lr && (pr == "workqueue" || lr == "workqueue") {
		fixed = append(fixed, "retention")
	}
	if len(fixed) > 0 {
		return nil, nil, fmt.Errorf("its configuration changed in %s, which a stream update cannot set back", strings.Join(fixed, ", "))
	}
	var changed []string
	for f := range union(pc, lc) {
		if !slices.Contains(keptAsLive, f) && !reflect.DeepEqual(pc[f], lc[f]) {
			changed = append(changed, f)
		}
	}
	if len(changed) == 0 {
		return nil, nil, nil
	}
	sort.Strings(changed)
	var back map[string]json.RawMessage
	if err := json.Unmarshal(point, &back); err != nil {
		return nil, nil, fmt.Errorf("the point's configuration does not read (%v)", err)
	}
	var lraw map[string]json.RawMessage
	_ = json.Unmarshal(live, &lraw)
	for _, f := range keptAsLive {
		if v, ok := lraw[f]; ok {
			back[f] = v
		} else {
			delete(back, f)
		}
	}
	data, err := json.Marshal(back)
	if err != nil {
		return nil, nil, fmt.Errorf("the point's configuration does not encode (%v)", err)
	}
	return changed, data, nil
}

// plain drops from a decoded configuration what does not tell two apart:
// zero values (absent and zero read the same to the server) and the
// server's own metadata (_nats.*).
func plain(c map[string]any) {
	if md, ok := c["metadata"].(map[string]any); ok {
		for k := range md {
			if strings.HasPrefix(k, "_nats.") {
				delete(md, k)
			}
		}
	}
	if c["compression"] == "none" {
		delete(c, "compression") // the server's name for none given
	}
	for k, v := range c {
		switch x := v.(type) {
		case nil:
			delete(c, k)
		case bool:
			if !x {
				delete(c, k)
			}
		case float64:
			if x == 0 {
				delete(c, k)
			}
		case string:
			if x == "" {
				delete(c, k)
			}
		case []any:
			if len(x) == 0 {
				delete(c, k)
			}
		case map[string]any:
			if len(x) == 0 {
				delete(c, k)
			}
		}
	}
}

func on(c map[string]any, f string) bool { b, _ := c[f].(bool); return b }

func str(c map[string]any, f string) string { s, _ := c[f].(string); return s }

func union(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// count is n with thousands separators: 1,000.
func count(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// wereOf is "was" for one, "were" for any other count.
func wereOf(n uint64) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// messages is "1 message" or "1,000 messages".
func messages(n uint64) string {
	if n == 1 {
		return "1 message"
	}
	return count(n) + " messages"
}
