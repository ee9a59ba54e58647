package keeper

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// How a restore gathers its evidence, without a read of its own where the
// restore already reads: the point's and the aside's verifications are the
// ones the order of steps makes; a live stream's state at removal is the one
// removeCovered reads to decide it may go; what is read only for the
// evidence is each restored stream's info, two subject counts per object
// store, and each consumer's info, once the restore is done. The evidence
// so far rides in the restore's journal, so a keeper that finishes an
// interrupted restore has it too.

// evidenceWait bounds the reads of one evidence check. A stream or consumer
// between leaders answers within seconds; one whose servers are away does
// not come back by waiting, and the restore is not held for it: what could
// not be read in this time is reported as not checked.
const evidenceWait = 2 * time.Minute

// newEvidence begins the report of a restore (none is made for a dry run).
func newEvidence(j *journal, started time.Time) *Evidence {
	return &Evidence{Module: j.Module, Local: j.Local, Kind: j.kind(), Point: j.Point, Aside: j.Aside,
		Caller: j.Caller, Why: j.Why, Started: started.UTC(), Checks: []Check{}, Steps: []StepTime{}}
}

// pointCheck is the point-verified check of what a restore restores from:
// read whole, beside the set-aside, before the aside counted and anything
// was removed (whole), or, when none of the
// kept data was live, checked stream by stream as the restore read it.
func pointCheck(p *Point, m *busarchive.Manifest, rep *busarchive.Report, whole bool) Check {
	fig := &ArchiveFigures{Size: p.ArchiveSize, Sum: p.ArchiveSum, Streams: len(m.Streams)}
	if whole {
		fig.BytesChecked = rep.Bytes
		fig.How = "read whole and checked against its manifest while the live data was set aside, before that aside was committed and before anything was removed"
	} else {
		fig.BytesChecked = dataBytes(m)
		fig.How = "none of the kept data was live, so nothing could be touched; each stream's data was checked " +
			"against its manifest's SHA-256 as the restore read it, and its end sent to the server only once it matched"
	}
	ok := fig.BytesChecked > 0 || len(m.Streams) == 0
	return Check{Name: CheckPointVerified, Verdict: verdictOf(ok), Archive: fig,
		Said: fmt.Sprintf("%s: %d bytes checked of an archive of %d bytes%s, %d stream(s); %s",
			verdictOf(ok), fig.BytesChecked, fig.Size, sumSaid(fig.Sum), fig.Streams, fig.How)}
}

// asideCheck is the aside-verified check of an aside read back from the
// store and verified whole before its aside.json was written.
func asideCheck(a *Aside, rep *busarchive.Report) Check {
	fig := &ArchiveFigures{Size: a.ArchiveSize, Sum: a.ArchiveSum, BytesChecked: rep.Bytes, Streams: len(a.Streams),
		How: "read back from the store and verified whole against its manifest before its aside.json was written, and before anything was removed"}
	ok := rep.Bytes > 0 && len(rep.Streams) == len(a.Streams)
	return Check{Name: CheckAsideVerified, Verdict: verdictOf(ok), Archive: fig,
		Said: fmt.Sprintf("%s: aside %s, %d bytes checked of an archive of %d bytes%s, %d stream(s); %s",
			verdictOf(ok), a.ID, fig.BytesChecked, fig.Size, sumSaid(fig.Sum), fig.Streams, fig.How)}
}

func sumSaid(sum string) string {
	if sum == "" {
		return ""
	}
	return " (checksum " + sum + ")"
}

func dataBytes(m *busarchive.Manifest) int64 {
	var n int64
	for _, s := range m.Streams {
		for _, e := range s.Entries {
			if strings.HasSuffix(e.Name, "/"+busarchive.DataName) {
				n += e.Size
			}
		}
	}
	return n
}

func countOf(s StreamSum) *StreamCount {
	return &StreamCount{Messages: s.Messages, Bytes: s.Bytes, FirstSeq: s.FirstSeq, LastSeq: s.LastSeq}
}

func countOfInfo(si *StreamInfo) *StreamCount {
	return &StreamCount{Messages: si.Messages, Bytes: si.Bytes, FirstSeq: si.FirstSeq, LastSeq: si.LastSeq}
}

// sawRemoval records, in the no-late-writes check, a live stream as it
// stood the moment before it was removed (si), against its aside's record.
// si is nil when the stream was not on the bus to be removed.
func (x *run) sawRemoval(stream string, si *StreamInfo) {
	ev := x.j.Evidence
	if ev == nil {
		return
	}
	f := StreamFigures{Stream: stream, Verdict: Fail}
	held, ok := newestHolding(x.asides, stream)
	if ok {
		f.Want = countOf(held)
	}
	switch {
	case si == nil:
		f.Note = "not checked: it was not on the bus when it was to be removed, so this restore removed nothing of it"
	case !ok:
		f.Note = "no aside holds it"
	default:
		f.Got = countOfInfo(si)
		if sameState(held, si) {
			f.Verdict = Pass
			f.Note = "its last sequence the moment before removal was the aside's"
		} else {
			f.Note = "it changed after it was set aside"
		}
	}
	c := ev.Find(CheckNoWritesAfter)
	if c == nil {
		ev.SetCheck(Check{Name: CheckNoWritesAfter})
		c = ev.Find(CheckNoWritesAfter)
	}
	c.Streams = append(c.Streams, f)
	failed := 0
	for _, s := range c.Streams {
		if s.Verdict != Pass {
			failed++
		}
	}
	c.Verdict = verdictOf(failed == 0)
	c.Said = fmt.Sprintf("%s: %d of %d live stream(s) had the last sequence and no message beyond their aside's the moment before they were removed",
		c.Verdict, len(c.Streams)-failed, len(c.Streams))
}

// checkRestored reads each restored stream back and compares it with the
// manifest, and counts the KV buckets' keys and the object stores' objects.
func (x *run) checkRestored(ctx context.Context) {
	ev := x.j.Evidence
	if ev == nil || x.arch == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, x.k.evidenceWait)
	defer cancel()
	began := x.k.now()
	m := x.arch.Manifest()
	if ev.Find(CheckPointVerified) == nil && x.point != nil {
		// A restore into absent data checked the point as it read it.
		ev.SetCheck(pointCheck(x.point, m, nil, false))
	}
	var streams, kv, obj []StreamFigures
	for _, s := range x.j.Restore {
		sm := m.Stream(s)
		if sm == nil {
			streams = append(streams, StreamFigures{Stream: s, Verdict: Fail, Note: "not in the point's manifest"})
			continue
		}
		want := &StreamCount{Messages: sm.State.Msgs, Bytes: sm.State.Bytes, FirstSeq: sm.State.FirstSeq, LastSeq: sm.State.LastSeq}
		f := StreamFigures{Stream: s, Want: want, Verdict: Fail}
		si, err := x.k.bus.Stream(ctx, s)
		if err != nil {
			f.Note = "not checked: it could not be read after the restore: " + err.Error()
			streams = append(streams, f)
			continue
		}
		f.Got = countOfInfo(si)
		f.Verdict = verdictOf(*f.Got == *want)
		streams = append(streams, f)
		if bucket, ok := strings.CutPrefix(s, "KV_"); ok && hasSubject(sm, "$KV."+bucket+".>") {
			kv = append(kv, x.kvFigures(s, si))
		}
		if bucket, ok := strings.CutPrefix(s, "OBJ_"); ok && hasSubject(sm, "$O."+bucket+".M.>") {
			obj = append(obj, x.objectFigures(ctx, s, bucket, si))
		}
	}
	ev.SetCheck(itemsCheck(CheckStreams, streams, "restored stream(s) hold the messages, bytes and first and last sequence of their manifest"))
	if len(kv) > 0 {
		ev.SetCheck(itemsCheck(CheckKVKeys, kv, "KV bucket(s) hold as many keys (subjects, a deleted key's marker counted) as the point"))
	}
	if len(obj) > 0 {
		ev.SetCheck(itemsCheck(CheckObjects, obj, "object store(s) hold as many objects as the point"))
	}
	ev.Timed("check streams", began, x.k.now())
}

// itemsCheck is a check made of per-stream figures.
func itemsCheck(name string, fs []StreamFigures, what string) Check {
	failed := 0
	for _, f := range fs {
		if f.Verdict != Pass {
			failed++
		}
	}
	v := verdictOf(failed == 0)
	return Check{Name: name, Verdict: v, Streams: fs, Said: fmt.Sprintf("%s: %d of %d %s", v, len(fs)-failed, len(fs), what)}
}

func hasSubject(sm *busarchive.StreamManifest, subject string) bool {
	for _, s := range sm.Config.Subjects {
		if s == subject {
			return true
		}
	}
	return false
}

// pointSubjects is how many subjects the stream held when its point was
// taken, as the server wrote it in the snapshot's backup.json.
func (x *run) pointSubjects(stream string) (uint64, error) {
	r, err := x.arch.StreamMeta(stream)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var meta struct {
		State struct {
			NumSubjects uint64 `json:"num_subjects"`
		} `json:"state"`
	}
	data, err := io.ReadAll(io.LimitReader(r, maxRecordSize))
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return 0, fmt.Errorf("its backup.json does not decode: %w", err)
	}
	return meta.State.NumSubjects, nil
}

// kvFigures counts a restored KV bucket's keys: the stream's subjects, each
// a key (one whose last entry is a delete or purge marker counted too), as
// the server counts them, against the point's count in its backup.json.
func (x *run) kvFigures(stream string, si *StreamInfo) StreamFigures {
	f := StreamFigures{Stream: stream, Verdict: Fail}
	want, err := x.pointSubjects(stream)
	if err != nil {
		f.Note = "not checked: the point's count of keys could not be read: " + err.Error()
		return f
	}
	got := si.NumSubjects
	f.Count = &SubjectFigures{Want: want, Got: got}
	f.Verdict = verdictOf(got == want)
	f.Note = fmt.Sprintf("%d key(s) in the point, %d on the bus", want, got)
	return f
}

// objectFigures counts a restored object store's objects: the subjects of
// its meta messages ($O.<bucket>.M.>, one per object, a deleted object's
// marker counted), with its chunk subjects ($O.<bucket>.C.>). The point
// records no count of objects of its own, only of subjects (its
// backup.json): the check passes when the stream holds that many subjects
// and they are all of objects and their chunks.
func (x *run) objectFigures(ctx context.Context, stream, bucket string, si *StreamInfo) StreamFigures {
	f := StreamFigures{Stream: stream, Verdict: Fail}
	want, err := x.pointSubjects(stream)
	if err != nil {
		f.Note = "not checked: the point's count of subjects could not be read: " + err.Error()
		return f
	}
	objects, err := x.k.bus.SubjectCount(ctx, stream, "$O."+bucket+".M.>")
	if err != nil {
		f.Note = "not checked: its objects could not be counted: " + err.Error()
		return f
	}
	chunks, err := x.k.bus.SubjectCount(ctx, stream, "$O."+bucket+".C.>")
	if err != nil {
		f.Note = "not checked: its chunks could not be counted: " + err.Error()
		return f
	}
	got := si.NumSubjects
	f.Count = &SubjectFigures{Want: want, Got: got, Objects: &objects, Chunks: &chunks}
	f.Verdict = verdictOf(got == want && objects+chunks == want)
	f.Note = fmt.Sprintf("%d object(s) and %d chunk subject(s) on the bus make %d subject(s); the point held %d",
		objects, chunks, objects+chunks, want)
	return f
}

// expectConsumer is what one consumer the restore sets back must be once
// it is done: its ack floor, and the configuration it must have (configSum):
// a consumer moved (reset) keeps the live one's; one made again, or one
// that comes back with its stream, has the recorded one.
func expectConsumer(mv Move, pos Position, live *Position, ov *Overrides) ConsumerFigures {
	c := ConsumerFigures{Stream: mv.Stream, Consumer: mv.Consumer, By: mv.By, WantFloor: pos.AckFloor}
	cfg := pos.Config
	if mv.By == MoveReset && live != nil {
		cfg = live.Config
	}
	c.WantConfig = configSum(cfg, mv.By == MoveWithStream && ov != nil)
	return c
}

// configSum is the SHA-256 of a consumer configuration with its keys
// sorted, without the server's own metadata (keys beginning "_nats.",
// which a server sets on every create), and without num_replicas when
// ignoreReplicas (a restore whose overrides change its stream's replicas
// may lower its consumers').
func configSum(raw json.RawMessage, ignoreReplicas bool) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		h := sha256.Sum256(raw)
		return hex.EncodeToString(h[:])
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for k := range md {
			if strings.HasPrefix(k, "_nats.") {
				delete(md, k)
			}
		}
		if len(md) == 0 {
			delete(m, "metadata")
		}
	}
	if ignoreReplicas {
		delete(m, "num_replicas")
	}
	b, _ := json.Marshal(m)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// checkConsumers reads back every consumer the restore set back (or that
// came back with its stream) and compares it with what it must be.
// stopped is the error that stopped setting the positions, if any.
func (x *run) checkConsumers(ctx context.Context, stopped error) {
	ev := x.j.Evidence
	if ev == nil || x.j.kind() == KindAsideOnly {
		return
	}
	if x.point == nil {
		ev.SetCheck(Check{Name: CheckConsumers, Verdict: Fail,
			Said: "FAIL: not checked: what the restore restored from is gone, so no consumer was set back"})
		return
	}
	if len(x.j.Expect) == 0 && stopped == nil {
		if len(x.j.Reposition) > 0 {
			x.j.Evidence.SetCheck(Check{Name: CheckConsumers, Verdict: Fail,
				Said: "FAIL: not checked: the restore was begun by a keeper that recorded no expected positions"})
		}
		return // no consumer to set back: nothing to check
	}
	ctx, cancel := context.WithTimeout(ctx, x.k.evidenceWait)
	defer cancel()
	began := x.k.now()
	infos := map[string]*StreamInfo{}
	streamOf := func(s string) (*StreamInfo, error) {
		if si, ok := infos[s]; ok {
			return si, nil
		}
		si, err := x.k.bus.Stream(ctx, s)
		if err == nil {
			infos[s] = si
		}
		return si, err
	}
	var fs []ConsumerFigures
	failed := 0
	for _, want := range x.j.Expect {
		f := want
		f.Verdict = Fail
		got, err := x.k.bus.Consumer(ctx, f.Stream, f.Consumer)
		si, serr := streamOf(f.Stream)
		switch {
		case err != nil:
			f.Note = "not set back: it could not be read: " + err.Error()
		case serr != nil:
			f.Note = "not checked: its stream could not be read: " + serr.Error()
		default:
			floor := got.AckFloor
			f.GotFloor, f.GotConfig = &floor, configSum(got.Config, f.By == MoveWithStream && x.j.Overrides != nil)
			same := f.GotConfig == f.WantConfig
			if f.By == MoveWithStream {
				// The point records the snapshot's own position (snapshot_positions.go);
				// points taken before that recorded it just before the
				// snapshot, so one that acknowledged meanwhile comes back
				// a little ahead.
				at := floor >= f.WantFloor && floor <= si.LastSeq
				f.Verdict = verdictOf(at && same)
				f.Note = "came back with its stream's snapshot, at or after the position recorded for it"
			} else {
				// The reset delivers the recorded floor's next message, or
				// the stream's first one if that one is gone.
				want := max(f.WantFloor, si.FirstSeq-min(si.FirstSeq, 1))
				f.Verdict = verdictOf(floor == want && same)
				if want != f.WantFloor {
					f.Note = fmt.Sprintf("the stream now begins at %d, so the recorded ack floor %d reads %d", si.FirstSeq, f.WantFloor, want)
				}
				f.WantFloor = want
			}
			if !same {
				f.Note = strings.TrimPrefix(f.Note+"; its configuration is not the one it must have", "; ")
			}
		}
		if f.Verdict != Pass {
			failed++
		}
		fs = append(fs, f)
	}
	v := verdictOf(failed == 0 && stopped == nil)
	said := fmt.Sprintf("%s: %d of %d consumer(s) at their recorded position with their configuration unchanged", v, len(fs)-failed, len(fs))
	if stopped != nil {
		said += "; setting the positions stopped: " + stopped.Error()
	}
	c := Check{Name: CheckConsumers, Verdict: v, Said: said}
	c.Consumers, c.Omitted = boundConsumers(fs)
	ev.SetCheck(c)
	ev.Timed("check consumers", began, x.k.now())
}

// timed runs step and records its time in the evidence.
func (x *run) timed(step string, fn func() error) error {
	began := x.k.now()
	err := fn()
	if x.j.Evidence != nil {
		x.j.Evidence.Timed(step, began, x.k.now())
	}
	return err
}

// evidenceRel is where a restore's evidence lies: beside the aside it made,
// or, with none, beside the record of what it restored from.
func evidenceRel(j *journal) string {
	if j.Aside != "" {
		return asideRel(j.Aside)
	}
	return j.Point
}

// finishEvidence concludes the journal's evidence, bounds it, and writes
// evidence.json and summary.md to the store. It returns the report (nil
// when the journal has none) and why it could not be written, if so.
func (k *Keeper) finishEvidence(ctx context.Context, j *journal) (*Evidence, error) {
	ev := j.Evidence
	if ev == nil {
		return nil, nil
	}
	for i := range ev.Checks {
		c := &ev.Checks[i]
		var more int
		c.Streams, more = boundStreams(c.Streams)
		c.Omitted += more
	}
	ev.Dir = evidenceRel(j)
	if ev.PointSum == "" && j.Point != "" {
		if p, err := k.readHead(ctx, j.Point); err == nil {
			ev.PointSum = p.ArchiveSum
		}
	}
	ev.Conclude(k.now())
	if ev.Dir == "" {
		return ev, errors.New("it has no place in the store")
	}
	ctx = context.WithoutCancel(ctx)
	if j.Aside == "" && isAsideRel(ev.Dir) {
		// An aside put back into absent kept data: the aside keeps the
		// report of the restore that made it.
		there, err := k.exists(ctx, path.Join(ev.Dir, evidenceFile))
		if err != nil {
			return ev, err
		}
		if there {
			return ev, fmt.Errorf("aside %s keeps the report of the restore that made it", path.Base(ev.Dir))
		}
	}
	if _, err := k.putJSON(ctx, path.Join(ev.Dir, evidenceFile), ev); err != nil {
		return ev, err
	}
	if _, err := k.putBytes(ctx, path.Join(ev.Dir, summaryFile), []byte(ev.Summary())); err != nil {
		return ev, err
	}
	return ev, nil
}

// evidenceSaid is what a reply adds about the evidence: its verdict and
// where it lies, or why it could not be written.
func (k *Keeper) evidenceSaid(ev *Evidence, werr error) string {
	if ev == nil {
		return ""
	}
	if werr != nil {
		return fmt.Sprintf(" Evidence: %s; it could not be written to the store (%v), so it is only in this reply and the act.", ev.Said, werr)
	}
	return fmt.Sprintf(" Evidence: %s; see %s.", ev.Said, k.abs(path.Join(ev.Dir, evidenceFile)))
}

// done reports whether the run restored every stream (it reached the
// positions step): the bus then holds the point's data, whatever follows.
func (x *run) done() bool {
	return x.j.Step == StepPosition && x.j.kind() != KindAsideOnly
}

// unprovenStart is the evidence of a restore a keeper that kept none began:
// what it checked before it removed anything is not known, so those checks
// fail, saying why.
func unprovenStart(j *journal) *Evidence {
	ev := newEvidence(j, j.Started)
	why := "not checked: the restore was begun by a keeper that kept no evidence of it, and a keeper that started again finished it"
	if j.Point != "" {
		ev.SetCheck(Check{Name: CheckPointVerified, Verdict: Fail, Said: "FAIL: " + why})
	}
	ev.SetCheck(Check{Name: CheckAsideVerified, Verdict: Fail, Said: "FAIL: " + why})
	return ev
}
