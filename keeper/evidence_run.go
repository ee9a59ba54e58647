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
		ev.SetCheck(pointCheck(pl.point, pl.manifest, pl.verified, pl.verifiedHow()))
		ev.Timed("verify", pl.verifyBegan, pl.verifyEnded)
	}
	if aside != nil && asideRep != nil {
		ev.SetCheck(asideCheck(aside, asideRep))
		ev.Timed("aside", asideBegan, now())
	}
	return ev
}

// How a restore's point was verified (pointCheck).
const (
	// pointReadBeside: read whole, beside the set-aside, before the aside
	// counted and anything was removed.
	pointReadBeside = "read whole and checked against its manifest while the live data was set aside, before that aside was committed and before anything was removed"
	// pointAsWritten: a moment's point this restore wrote, checked as it
	// wrote it (restore_at_check.go), and not read whole again.
	pointAsWritten = "verified as this restore wrote it (the point of the moment): each stream's archive decoded message by message and held to its manifest " +
		"before the point was committed, before anything was set aside or removed; not read whole again, and each stream's data checked " +
		"against its manifest's SHA-256 as the restore read it for the server"
	// pointComposed: a moment's archive this restore composed and did not
	// store (restore_at_composed.go), checked as it composed it.
	pointComposed = "verified as this restore composed it (the archive of the moment, composed from its base and segments and written nowhere): each stream's archive " +
		"decoded message by message and held to its manifest before anything was set aside or removed; each stream's data composed again as the restore read it " +
		"for the server and held to the CRC-32C of the bytes checked"
	// pointAsRead: none of the kept data was live; checked stream by
	// stream as the restore read it.
	pointAsRead = "none of the kept data was live, so nothing could be touched; each stream's data was checked " +
		"against its manifest's SHA-256 as the restore read it, and its end sent to the server only once it matched"
)

// verifiedHow is how the plan's point was verified.
func (pl *restorePlan) verifiedHow() string {
	if pl.asWritten && pl.moment != nil {
		return pointComposed
	}
	if pl.asWritten {
		return pointAsWritten
	}
	return pointReadBeside
}

// pointCheck is the point-verified check of what a restore restores from,
// verified as how says: with the report rep of its verification, or (rep
// nil) checked stream by stream as the restore read it.
func pointCheck(p *Point, m *busarchive.Manifest, rep *busarchive.Report, how string) Check {
	fig := &ArchiveFigures{Size: p.ArchiveSize, Sum: p.ArchiveSum, Streams: len(m.Streams), How: how}
	if rep != nil {
		fig.BytesChecked = rep.Bytes
	} else {
		fig.BytesChecked = dataBytes(m)
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
		ev.SetCheck(pointCheck(x.point, m, nil, pointAsRead))
	}
	var streams, kv, obj []StreamFigures
	for _, s := range x.j.Restore {
		sm := m.Stream(s)
		if sm == nil {
			streams = append(streams, StreamFigures{Stream: s, Verdict: Fail, Note: "not in the point's manifest"})
			continue
		}
		want := x.wantOf(s, sm)
		f := StreamFigures{Stream: s, Method: kept.MethodFull, Want: want, Verdict: Fail}
		si, err := x.bus.Stream(ctx, s)
		if err != nil {
			f.Note = "not checked: it could not be read after the restore: " + err.Error()
			streams = append(streams, f)
			continue
		}
		f.Got = countOfInfo(si)
		f.Verdict = verdictOf(*f.Got == *want)
		var keysFloor *uint64 // the fewest keys the limits may leave
		if lim := limitsOf(sm.Config.Raw); lim.any() {
			keysFloor = x.judgeLimits(ctx, s, lim, &f)
		}
		streams = append(streams, f)
		if bucket, ok := strings.CutPrefix(s, "KV_"); ok && hasSubject(sm, "$KV."+bucket+".>") {
			kv = append(kv, x.kvFigures(sm, si, keysFloor))
		}
		if bucket, ok := strings.CutPrefix(s, "OBJ_"); ok && hasSubject(sm, "$O."+bucket+".M.>") {
			obj = append(obj, x.objectFigures(ctx, sm, bucket, si))
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

// wantOf is what the restored stream must hold: the point's state (a
// composed stream's, for a delta's tail put back), with
// its last sequence bumped where the restore kept the live one (with no
// message, the first sequence is then one past it, as the server has it).
func (x *restoreRun) wantOf(s string, sm *busarchive.StreamManifest) *StreamCount {
	st := sm.Held() // a stream cut: what its archive holds
	want := &StreamCount{Messages: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq}
	if h, ok := x.composed[s]; ok { // a delta's tail put back whole (composeTail)
		want = &StreamCount{Messages: h.Msgs, Bytes: h.Bytes, FirstSeq: h.FirstSeq, LastSeq: h.LastSeq}
	}
	if b := x.j.Bump[s]; b > want.LastSeq {
		want.LastSeq = b
		if want.Messages == 0 {
			want.FirstSeq = b + 1
		}
	}
	return want
}

// judgeLimits judges a restored stream whose configuration removes
// messages on their own (max-age, per-message TTL): the messages those
// limits removed are counted as expired, not missing. When the stream holds
// fewer than the point, the point's archive is read again to count the
// messages past the limits at the check (and, for a KV bucket, the keys
// that keep a message, which it returns); the stream passes when it lacks
// no more than those, keeps the last sequence, and gained nothing.
func (x *restoreRun) judgeLimits(ctx context.Context, s string, lim streamLimits, f *StreamFigures) *uint64 {
	planned := x.j.Expired[s]
	if f.Verdict == Pass {
		if planned > 0 {
			f.Note = fmt.Sprintf("%d of its messages are past the stream's %s: the server removes them at once (none was gone yet at the check)", planned, lim)
		}
		return nil
	}
	now := time.Now() // the server's clock expires them (planExpired)
	var expired uint64
	keys := map[string]bool{}
	kv := strings.HasPrefix(s, "KV_")
	err := scanArchive(ctx, x.arch, s, func(m busarchive.ArchivedMessage) {
		switch {
		case lim.expired(m.Time, m.Header, now):
			expired++
		case kv && len(keys) < maxKeysCounted:
			keys[m.Subject] = true
		}
	})
	if err != nil {
		f.Note = "not checked against its limits: the point could not be read again: " + err.Error()
		return nil
	}
	got, want := f.Got, f.Want
	last := got.LastSeq == want.LastSeq || (lim.Markers && got.LastSeq > want.LastSeq)
	ok := last && got.Messages <= want.Messages+expired && got.Messages+expired >= want.Messages &&
		(got.Bytes <= want.Bytes || lim.Markers) && got.FirstSeq >= want.FirstSeq
	if lim.Markers {
		f.Note = "the server writes a marker where the max age removes a subject's last message; "
	}
	f.Verdict = verdictOf(ok)
	f.Note += fmt.Sprintf("%d of the point's %d message(s) are not on the bus; %d of them were past the stream's %s at the check (%d when the restore was planned), "+
		"so they count as expired, not missing", want.Messages-min(got.Messages, want.Messages), want.Messages, expired, lim, planned)
	if !kv || len(keys) >= maxKeysCounted {
		return nil
	}
	n := uint64(len(keys))
	return &n
}

// maxKeysCounted bounds the keys judgeLimits holds to count a bucket's.
const maxKeysCounted = 1 << 20

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
// taken: for a stream cut, as its manifest counts them; else as the server
// wrote it in the snapshot's backup.json, which for a stream that holds
// fewer messages than its state is only the most it holds (upTo).
func (x *restoreRun) pointSubjects(sm *busarchive.StreamManifest) (n uint64, upTo bool, err error) {
	if c := sm.Cut; c != nil && c.Subjects != nil {
		return *c.Subjects, false, nil
	}
	upTo = sm.Cut != nil && sm.Cut.Msgs < sm.State.Msgs
	r, err := x.arch.StreamMeta(sm.Name)
	if err != nil {
		return 0, upTo, err
	}
	defer r.Close()
	var meta struct {
		State struct {
			NumSubjects uint64 `json:"num_subjects"`
		} `json:"state"`
	}
	data, err := io.ReadAll(io.LimitReader(r, maxRecordSize))
	if err != nil {
		return 0, upTo, err
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return 0, upTo, fmt.Errorf("its backup.json does not decode: %w", err)
	}
	return meta.State.NumSubjects, upTo, nil
}

// kvFigures counts a restored KV bucket's keys: the stream's subjects, each
// a key (one whose last entry is a delete or purge marker counted too), as
// the server counts them, against the point's count in its backup.json.
//
// floor, when not nil, is the fewest keys the stream's limits may leave
// (judgeLimits): the bucket passes with any count from it to the point's.
func (x *restoreRun) kvFigures(sm *busarchive.StreamManifest, si *StreamInfo, floor *uint64) StreamFigures {
	f := StreamFigures{Stream: sm.Name, Verdict: Fail}
	want, upTo, err := x.pointSubjects(sm)
	if err != nil {
		f.Note = "not checked: the point's count of keys could not be read: " + err.Error()
		return f
	}
	got := si.NumSubjects
	f.Count = &SubjectFigures{Want: want, Got: got}
	f.Verdict = verdictOf(got == want || (floor != nil && got >= *floor && got <= want) || (upTo && got <= want))
	f.Note = fmt.Sprintf("%d key(s) in the point, %d on the bus", want, got)
	if upTo {
		f.Note = fmt.Sprintf("at most %d key(s) in the point (it holds fewer messages than its state and counts no keys), %d on the bus", want, got)
	}
	if floor != nil && got != want {
		f.Note += fmt.Sprintf("; the stream's limits leave at least %d", *floor)
	}
	return f
}

// objectFigures counts a restored object store's objects: the subjects of
// its meta messages ($O.<bucket>.M.>, one per object, a deleted object's
// marker counted), with its chunk subjects ($O.<bucket>.C.>). The point
// records no count of objects of its own, only of subjects (its
// backup.json): the check passes when the stream holds that many subjects
// and they are all of objects and their chunks.
func (x *restoreRun) objectFigures(ctx context.Context, sm *busarchive.StreamManifest, bucket string, si *StreamInfo) StreamFigures {
	stream := sm.Name
	f := StreamFigures{Stream: stream, Verdict: Fail}
	want, upTo, err := x.pointSubjects(sm)
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
	f.Verdict = verdictOf((got == want || upTo && got <= want) && objects+chunks == got)
	f.Note = fmt.Sprintf("%d object(s) and %d chunk subject(s) on the bus make %d subject(s); the point held %d",
		objects, chunks, objects+chunks, want)
	if upTo {
		f.Note += " at most (it holds fewer messages than its state and counts no subjects)"
	}
	return f
}
