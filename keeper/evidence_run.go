package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
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

// startEvidence is the evidence of a restore about to run: the point's
// verification, and the aside's (from asideBegan to now), made before
// anything was removed.
func startEvidence(j *journal, pl *restorePlan, aside *Aside, asideRep *busarchive.Report, began, asideBegan time.Time, now func() time.Time, recovered bool) *Evidence {
	ev := newEvidence(j, began)
	ev.Recovered = recovered
	if pl.point != nil {
		ev.PointSum = pl.point.ArchiveSum
	}
	if pl.verified != nil {
		ev.SetCheck(pointCheck(pl.point, pl.manifest, pl.verified, true))
		ev.Timed("verify", pl.verifyBegan, pl.verifyEnded)
	}
	if aside != nil && asideRep != nil {
		ev.SetCheck(asideCheck(aside, asideRep))
		ev.Timed("aside", asideBegan, now())
	}
	return ev
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

// checkRestored reads each restored stream back and compares it with the
// manifest, and counts the KV buckets' keys and the object stores' objects.
func (x *restoreRun) checkRestored(ctx context.Context) {
	ev := x.j.Evidence
	if ev == nil || x.arch == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, x.evidenceWait)
	defer cancel()
	began := x.now()
	m := x.arch.Manifest()
	if ev.Find(CheckPointVerified) == nil && x.point != nil && len(x.j.Restore) > 0 {
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
		if h, ok := x.composed[s]; ok {
			want = &StreamCount{Messages: h.Msgs, Bytes: h.Bytes, FirstSeq: h.FirstSeq, LastSeq: h.LastSeq}
		}
		f := StreamFigures{Stream: s, Method: kept.MethodFull, Want: want, Verdict: Fail}
		si, err := x.bus.Stream(ctx, s)
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
	ev.Timed("check streams", began, x.now())
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
func (x *restoreRun) pointSubjects(stream string) (uint64, error) {
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
func (x *restoreRun) kvFigures(stream string, si *StreamInfo) StreamFigures {
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
func (x *restoreRun) objectFigures(ctx context.Context, stream, bucket string, si *StreamInfo) StreamFigures {
	f := StreamFigures{Stream: stream, Verdict: Fail}
	want, err := x.pointSubjects(stream)
	if err != nil {
		f.Note = "not checked: the point's count of subjects could not be read: " + err.Error()
		return f
	}
	objects, err := x.bus.SubjectCount(ctx, stream, "$O."+bucket+".M.>")
	if err != nil {
		f.Note = "not checked: its objects could not be counted: " + err.Error()
		return f
	}
	chunks, err := x.bus.SubjectCount(ctx, stream, "$O."+bucket+".C.>")
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
