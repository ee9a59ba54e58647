package keeper

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

// How a logical restore finds the keys that differ at the cost of what
// changed, not of the bucket. Messages are immutable, so a key's live value
// differs from the point's only if the key took a message after the point's
// last sequence (the live tail), or the point's last message of it is no
// longer live (deleted since: a purge, a limit, a message delete). The
// point's archive is read once for each key's last sequence and the sum of
// its value; the live side costs the tail and one look-up per key of the
// second kind. Then the archive is read once more, only when some key
// differs, for the values of those keys. A point with a key index of the
// stream (restore_logical_keyindex.go) is not read whole at all: the index
// gives each key's last sequence and sum, and only the messages holding
// the values to write (and an object store's metas to compare) are read,
// each checked against the index.

// logicalScope is which keys a logical restore looks at: nil for a point
// (the keys that changed since it, found as above); else the keys named,
// and, with all, every key the source holds (a logical aside put back).
type logicalScope struct {
	keys []string
	all  bool
}

// sourceKeys is what the first read of a stream's archive keeps: per key
// subject its last message's sequence and the sum of its value, and for an
// object store its meta messages and the sequences of its chunks.
type sourceKeys struct {
	head      *busarchive.ArchiveHead
	last      map[string]*sourceKey
	chunkSeqs map[string][]uint64
	ix        *busarchive.KeyIndex // the point's key index of the stream; nil: read whole
}

type sourceKey struct {
	seq  uint64
	sum  [32]byte
	gone bool                        // a delete or purge marker, or a deleted object's meta
	meta *busarchive.ArchivedMessage // an object store's meta message (read through ix for the candidates only)
	at   *busarchive.IndexedMessage  // where ix has it
}

// liveView is what the live stream told of the keys in scope: its detail,
// each key's live last message found in the tail, and the chunks the tail
// holds.
type liveView struct {
	sd     *StreamDetail
	last   map[string]*busarchive.ArchivedMessage
	chunks map[string][]busarchive.ArchivedMessage
}

// planLogicalStream finds the keys of one stream that differ between the
// source arch (a point, or a logical aside) and the live stream, with the
// values to write and the live ones to set aside; through the point's key
// index ix of the stream where it has one (nil: the archive read whole).
// held counts the bytes held, bounded by maxLogicalHeld.
func (k *Keeper) planLogicalStream(ctx context.Context, arch *openedArchive, sm *busarchive.StreamManifest, scope *logicalScope, ix *busarchive.KeyIndex, held *int) (*logicalStream, error) {
	bucket, object, _ := logicalKind(sm.Name, sm.Config.Subjects)
	ls := &logicalStream{name: sm.Name, object: object, bucket: bucket,
		chunks: map[string][]busarchive.ArchivedMessage{}, liveChunks: map[string][]busarchive.ArchivedMessage{}}
	src, err := ls.readSource(ctx, arch, ix, held)
	if err != nil {
		return nil, err
	}
	lv, err := k.liveView(ctx, ls, src.head.LastSeq, held)
	if err != nil {
		return nil, err
	}
	ls.liveLast, ls.liveConfig = lv.sd.LastSeq, lv.sd.Config
	cands := ls.candidates(src, lv, scope)
	if err := ls.readMetas(ctx, arch, src, cands, held); err != nil {
		return nil, err
	}
	ls.total = len(src.last)
	for s := range lv.last {
		if src.last[s] == nil {
			ls.total++
		}
	}
	for _, s := range cands {
		live, ok := lv.last[s]
		if !ok {
			if live, err = lastOf(ctx, k.bus, ls.name, s); err != nil {
				return nil, err
			}
		}
		same, err := sameValue(ctx, k.bus, ls, src.last[s], live)
		if err != nil {
			return nil, err
		}
		if !same {
			ls.keys = append(ls.keys, logicalKey{subject: s, live: live})
		}
	}
	sortKeys(ls.keys)
	if len(ls.keys) == 0 {
		return ls, nil
	}
	return ls, ls.readValues(ctx, arch, src, lv, held)
}

// readSource reads the stream's archive once, checked against its manifest
// as it is read, keeping per key what sourceKeys says; or, given the
// point's key index ix, takes it from the index and reads nothing.
func (ls *logicalStream) readSource(ctx context.Context, arch *openedArchive, ix *busarchive.KeyIndex, held *int) (*sourceKeys, error) {
	if ix != nil {
		return ls.indexedSource(ix, held)
	}
	rc, err := arch.CheckedStreamData(ctx, ls.name)
	if err != nil {
		return nil, fmt.Errorf("reading stream %s of the point: %w", ls.name, err)
	}
	defer rc.Close()
	src := &sourceKeys{last: map[string]*sourceKey{}, chunkSeqs: map[string][]uint64{}}
	head, err := busarchive.ReadStreamArchive(rc, nil, func(m busarchive.ArchivedMessage) error {
		switch {
		case ls.isChunk(m.Subject):
			src.chunkSeqs[m.Subject] = append(src.chunkSeqs[m.Subject], m.Seq)
			*held += 8
		case ls.isKey(m.Subject):
			sk := &sourceKey{seq: m.Seq, sum: sha256.Sum256(m.Data)}
			if ls.object {
				mm := m
				sk.meta, sk.gone = &mm, metaDeleted(m.Data)
				*held += len(m.Data)
			} else {
				sk.gone = kvGone(m.Header)
			}
			if src.last[m.Subject] == nil {
				*held += len(m.Subject) + 64
			}
			src.last[m.Subject] = sk
		}
		return heldFits(*held)
	})
	if err != nil {
		return nil, fmt.Errorf("reading stream %s of the point: %w", ls.name, err)
	}
	src.head = head
	return src, nil
}

// liveView reads the live stream's detail and its tail after the source's
// last sequence.
func (k *Keeper) liveView(ctx context.Context, ls *logicalStream, after uint64, held *int) (*liveView, error) {
	sd, err := k.bus.StreamDetail(ctx, ls.name)
	if err != nil {
		return nil, Errorf(ErrFailed, "reading live stream %s: %v", ls.name, err)
	}
	if b, obj, ok := logicalKind(ls.name, sd.Subjects); !ok || b != ls.bucket || obj != ls.object {
		return nil, Errorf(ErrConflict, "live stream %s is no longer a KV bucket or object store (its subjects are %s), so nothing was changed; use method full",
			ls.name, strings.Join(sd.Subjects, " "))
	}
	lv := &liveView{sd: sd, last: map[string]*busarchive.ArchivedMessage{}, chunks: map[string][]busarchive.ArchivedMessage{}}
	if sd.LastSeq <= after {
		return lv, nil
	}
	err = k.bus.Messages(ctx, ls.name, after+1, sd.LastSeq, func(m Message) error {
		am := archived(m)
		switch {
		case ls.isChunk(m.Subject):
			lv.chunks[m.Subject] = append(lv.chunks[m.Subject], am)
			*held += len(m.Header) + len(m.Data)
		case ls.isKey(m.Subject):
			lv.last[m.Subject] = &am
			*held += len(m.Subject) + len(m.Header) + len(m.Data)
		}
		return heldFits(*held)
	})
	if err != nil {
		return nil, Errorf(ErrFailed, "reading the messages of live stream %s after sequence %d: %v", ls.name, after, err)
	}
	return lv, nil
}

// candidates are the keys that may differ, sorted: for a point, those the
// tail holds and those whose last message in the point is no longer live;
// else the scope's.
func (ls *logicalStream) candidates(src *sourceKeys, lv *liveView, scope *logicalScope) []string {
	set := map[string]bool{}
	if scope == nil {
		for s := range lv.last {
			set[s] = true
		}
		for s, sk := range src.last {
			if !liveSeq(lv.sd, sk.seq) {
				set[s] = true
			}
		}
	} else {
		for _, s := range scope.keys {
			set[s] = ls.isKey(s)
		}
		for s := range src.last {
			set[s] = set[s] || scope.all
		}
	}
	out := make([]string, 0, len(set))
	for s, ok := range set {
		if ok {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// lastOf is the live last message of subject, or nil when it has none.
func lastOf(ctx context.Context, bus Bus, stream, subject string) (*busarchive.ArchivedMessage, error) {
	var last *busarchive.ArchivedMessage
	err := bus.LastBySubject(ctx, stream, subject, func(m Message) error {
		if m.Subject == subject {
			am := archived(m)
			last = &am
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, Errorf(ErrFailed, "reading the last message of %s on stream %s: %v", subject, stream, err)
	}
	return last, nil
}

// sameValue reports whether the live last message of a key holds the
// source's value: both absent (no message, or a delete or purge marker; a
// deleted object), or the same data (a KV value), or the same object (its
// meta but for its nuid, with its chunks whole on the bus).
func sameValue(ctx context.Context, bus Bus, ls *logicalStream, want *sourceKey, live *busarchive.ArchivedMessage) (bool, error) {
	wantGone := want == nil || want.gone
	liveGone := live == nil || ls.deleted(live)
	switch {
	case wantGone || liveGone:
		return wantGone == liveGone, nil
	case !ls.object:
		return sha256.Sum256(live.Data) == want.sum, nil
	}
	return sameObject(ctx, bus, ls, want.meta.Data, live.Data)
}

// sameObject reports whether the live meta describes the object want does,
// with its chunks on the bus under the live meta's nuid (SubjectCount
// counts the subject, not its messages: nats.go writes an object's chunks
// whole or purges them whole).
func sameObject(ctx context.Context, bus Bus, ls *logicalStream, want, live []byte) (bool, error) {
	w, wn, _ := metaSansNUID(want)
	l, ln, chunks := metaSansNUID(live)
	if w == nil || !bytes.Equal(w, l) || ln == "" {
		return false, nil
	}
	n, err := bus.SubjectCount(ctx, ls.name, ls.chunkSubject(ln))
	if err != nil {
		return false, Errorf(ErrFailed, "counting the chunks of object %s on stream %s: %v", wn, ls.name, err)
	}
	return n > 0 || chunks == 0, nil // chunks are written whole or purged whole (restore_logical_write.go)
}

// readValues reads the archive once more for the values of the keys that
// differ, and the chunks of their objects: the source's, to write, and the
// live ones the point still holds, to set aside (those of the tail are
// held already). With the point's key index, only the messages that hold
// them are read (logicalValues.indexed).
func (ls *logicalStream) readValues(ctx context.Context, arch *openedArchive, src *sourceKeys, lv *liveView, held *int) error {
	vs := ls.valuesWanted(src, lv)
	take := func(m busarchive.ArchivedMessage) error {
		if i, ok := vs.wantSeq[m.Seq]; ok && m.Subject == ls.keys[i].subject {
			mm := m
			ls.keys[i].want = &mm
			*held += len(m.Header) + len(m.Data)
		}
		if vs.chunkOf[m.Subject] {
			ls.chunks[m.Subject] = append(ls.chunks[m.Subject], m)
			*held += len(m.Data)
		}
		if vs.liveOf[m.Subject] && liveSeq(lv.sd, m.Seq) {
			ls.liveChunks[m.Subject] = insertBySeq(ls.liveChunks[m.Subject], m)
			*held += len(m.Data)
		}
		return heldFits(*held)
	}
	if src.ix != nil {
		return arch.ReadIndexed(ctx, src.ix, vs.indexed(src.ix, lv), take)
	}
	rc, err := arch.CheckedStreamData(ctx, ls.name)
	if err != nil {
		return fmt.Errorf("reading stream %s of the point again: %w", ls.name, err)
	}
	defer rc.Close()
	if _, err = busarchive.ReadStreamArchive(rc, nil, take); err != nil {
		return fmt.Errorf("reading stream %s of the point again: %w", ls.name, err)
	}
	return nil
}

// logicalValues is what readValues keeps of the source: a key's last
// sequence (its index in keys), the chunk subjects of the source's objects
// that differ, and the live chunk subjects of the live objects they
// overwrite.
type logicalValues struct {
	wantSeq         map[uint64]int
	chunkOf, liveOf map[string]bool
}

// valuesWanted is what readValues keeps of the source; it sets aside the
// tail's chunks of the live objects overwritten.
func (ls *logicalStream) valuesWanted(src *sourceKeys, lv *liveView) *logicalValues {
	vs := &logicalValues{wantSeq: map[uint64]int{}, chunkOf: map[string]bool{}, liveOf: map[string]bool{}}
	for i, key := range ls.keys {
		if sk := src.last[key.subject]; sk != nil && !sk.gone {
			vs.wantSeq[sk.seq] = i
			if ls.object {
				_, nuid, _ := metaSansNUID(sk.meta.Data)
				vs.chunkOf[ls.chunkSubject(nuid)] = true
			}
		}
		if ls.object && key.live != nil && !ls.deleted(key.live) {
			_, nuid, _ := metaSansNUID(key.live.Data)
			cs := ls.chunkSubject(nuid)
			ls.liveChunks[cs] = lv.chunks[cs]
			vs.liveOf[cs] = true
		}
	}
	return vs
}

// change is the stream's entry in the plan's changes: logical, and why.
func (ls *logicalStream) change(sm *busarchive.StreamManifest) kept.StreamChange {
	st := sm.State
	ch := kept.StreamChange{Stream: ls.name, Kind: "kv", Method: kept.MethodLogical,
		Then: &kept.SeqState{FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Messages: st.Msgs, Bytes: st.Bytes}}
	kc := &kept.KeyChanges{}
	for _, key := range ls.keys {
		mark := "~"
		switch {
		case key.want == nil:
			kc.Added++
			mark = "+"
		case key.live == nil || ls.deleted(key.live):
			kc.Deleted++
			mark = "-"
		default:
			kc.Changed++
		}
		if len(kc.Names) < maxLogicalNames {
			kc.Names = append(kc.Names, mark+ls.keyName(key.subject))
		} else {
			kc.Cut = true
		}
	}
	what := "keys"
	if ls.object {
		ch.Kind, ch.Objects, what = "object-store", kc, "objects"
	} else {
		ch.Keys = kc
	}
	ch.Why = fmt.Sprintf("logical: %s of %s %s differ, written as new revisions (revisions and times are new, not the point's); nothing is removed",
		grouped(len(ls.keys)), grouped(ls.total), what)
	return ch
}

// keyName is a key's name in sentences: the KV key, or the object's meta
// subject token.
func (ls *logicalStream) keyName(subject string) string {
	if ls.object {
		return strings.TrimPrefix(subject, "$O."+ls.bucket+".M.")
	}
	return strings.TrimPrefix(subject, "$KV."+ls.bucket+".")
}

// grouped is n with its thousands grouped: 10,000.
func grouped(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// insertBySeq puts m into ms, kept in rising sequence order.
func insertBySeq(ms []busarchive.ArchivedMessage, m busarchive.ArchivedMessage) []busarchive.ArchivedMessage {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].Seq >= m.Seq })
	if i < len(ms) && ms[i].Seq == m.Seq {
		return ms
	}
	return append(ms[:i], append([]busarchive.ArchivedMessage{m}, ms[i:]...)...)
}

// heldFits refuses a logical restore that would hold more than
// maxLogicalHeld bytes.
func heldFits(held int) error {
	if held > maxLogicalHeld {
		return Errorf(ErrConflict, "the values a logical restore would compare and write take over %s, more than it holds at once, so nothing was changed; use method full or delta",
			HumanBytes(maxLogicalHeld))
	}
	return nil
}

// liveSeq reports whether seq holds a live message of the stream sd.
func liveSeq(sd *StreamDetail, seq uint64) bool {
	if seq < sd.FirstSeq || seq > sd.LastSeq || sd.Messages == 0 {
		return false
	}
	i := sort.Search(len(sd.Deleted), func(i int) bool { return sd.Deleted[i] >= seq })
	return i == len(sd.Deleted) || sd.Deleted[i] != seq
}

func archived(m Message) busarchive.ArchivedMessage {
	return busarchive.ArchivedMessage{Seq: m.Seq, Time: m.Time, Subject: m.Subject, Header: m.Header, Data: m.Data}
}

// isKey reports whether subject is one of the stream's keys: a KV key, or
// an object's meta.
func (ls *logicalStream) isKey(subject string) bool {
	if ls.object {
		return strings.HasPrefix(subject, "$O."+ls.bucket+".M.")
	}
	return strings.HasPrefix(subject, "$KV."+ls.bucket+".")
}

// isChunk reports whether subject holds an object store's chunks.
func (ls *logicalStream) isChunk(subject string) bool {
	return ls.object && strings.HasPrefix(subject, "$O."+ls.bucket+".C.")
}

func (ls *logicalStream) chunkSubject(nuid string) string { return "$O." + ls.bucket + ".C." + nuid }

// deleted reports whether a live key's last message says it is deleted.
func (ls *logicalStream) deleted(m *busarchive.ArchivedMessage) bool {
	if ls.object {
		return metaDeleted(m.Data)
	}
	return kvGone(m.Header)
}

// kvGone reports whether a KV message is a delete or purge marker (its
// KV-Operation header, as nats.go writes it; the server's own markers carry
// KV-Operation: PURGE too).
func kvGone(header []byte) bool {
	op := headerValue(header, "KV-Operation")
	return op == "DEL" || op == "PURGE"
}

// objectMeta is the part of an object's meta (nats.go's ObjectInfo) a
// logical restore reads.
type objectMeta struct {
	Name    string `json:"name"`
	NUID    string `json:"nuid"`
	Chunks  uint64 `json:"chunks"`
	Deleted bool   `json:"deleted"`
}

// metaDeleted reports whether an object's meta says it is deleted, or does
// not decode (no object can be read through it).
func metaDeleted(data []byte) bool {
	var m objectMeta
	return json.Unmarshal(data, &m) != nil || m.Deleted
}

// metaSansNUID is an object's meta without its nuid, as canonical JSON,
// with its nuid and chunk count; nil when it does not decode.
func metaSansNUID(data []byte) ([]byte, string, uint64) {
	var m objectMeta
	var all map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || json.Unmarshal(data, &all) != nil {
		return nil, "", 0
	}
	delete(all, "nuid")
	out, err := json.Marshal(all)
	if err != nil {
		return nil, "", 0
	}
	return out, m.NUID, m.Chunks
}

// headerValue is the first value of key in a NATS header block, or "".
func headerValue(header []byte, key string) string {
	for _, line := range headerLines(header) {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// headerLines are the header lines of a NATS header block (after its
// NATS/1.0 status line, up to its blank line), at most maxHeaderLines.
func headerLines(header []byte) []string {
	const maxHeaderLines = 1024
	if !bytes.HasPrefix(header, []byte("NATS/1.0")) {
		return nil
	}
	var out []string
	rest := string(header)
	_, rest, _ = strings.Cut(rest, "\r\n") // the status line
	for len(out) < maxHeaderLines {
		line, more, ok := strings.Cut(rest, "\r\n")
		if !ok || line == "" {
			break
		}
		out = append(out, line)
		rest = more
	}
	return out
}
