package keeper

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/spool"
	"github.com/nats-keeper/nats-keeper/kept"
)

// The point of a moment is verified as writeMoment writes it: each
// stream's archive is decoded, on a goroutine of its own (the second
// core), from the very bytes the archive's writer takes and hashes
// (busarchive.StreamCheck), and once the archive is written, before it is
// committed, held with its backup.json to its manifest entry, as a
// verification of the point read back would. The restore that made the
// point takes that verification (madePoint) and does not read the point
// whole again; its read of each stream for the server checks the bytes
// against the CRC-32C of those written (busarchive.Archive.NoteWritten), so
// bytes the store changed since fail it, as after a whole verification.

// madePoint is the point of a moment as momentPoint gives it: checked is
// the verification made as this request wrote it, from checkBegan to
// checkEnded; nil when the point was there already (made by an earlier
// request), which a restore then verifies as any point.
type madePoint struct {
	*Point
	checked                *busarchive.Report
	checkBegan, checkEnded time.Time
	crcs                   map[string]uint32 // each stream's data as written (StreamCheck.CRC)
	// arch, recomposed, bases and moment are set when the archive was
	// composed and not stored (composeMoment): Point is then a
	// record no store holds, arch its archive, and moment what makes it
	// again (the journal's).
	arch       *openedArchive
	recomposed *spool.Recomposed
	bases      *openedArchive // the base the composed archive is composed from again
	moment     *journalMoment
}

// momentChecks is the check of each stream of a moment's point as it is
// written.
type momentChecks struct {
	mu      sync.Mutex
	began   time.Time
	streams map[string]*momentCheck
}

type momentCheck struct {
	data *busarchive.StreamCheck
	meta bytes.Buffer // backup.json as written
}

func newMomentChecks(now time.Time) *momentChecks {
	return &momentChecks{began: now, streams: map[string]*momentCheck{}}
}

// tee is data and meta of stream, what is written to them checked too
// (after it went to them); call end once the stream is written.
func (mc *momentChecks) tee(ctx context.Context, stream string, data, meta io.Writer) (_, _ io.Writer, end func()) {
	c := &momentCheck{data: busarchive.NewStreamCheck(ctx, stream)}
	mc.mu.Lock()
	if old := mc.streams[stream]; old != nil {
		old.data.Close() // taken again: the last take is the one written
	}
	mc.streams[stream] = c
	mc.mu.Unlock()
	return io.MultiWriter(data, c.data), io.MultiWriter(meta, &c.meta), func() { c.data.Close() }
}

// source is the archive writer's source of a moment's streams: write
// writes each stream into data and meta, checked as they are written
// (tee), and both are closed once it returns.
func (mc *momentChecks) source(write func(ctx context.Context, stream string, data, meta io.Writer) error) streamSource {
	return func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		defer data.Close()
		defer meta.Close()
		d, m, end := mc.tee(ctx, stream, data, meta)
		defer end()
		return write(ctx, stream, d, m)
	}
}

// report holds each stream's check to m, the manifest of the archive
// written, and returns the verification's report as Verify gives it, the
// CRC-32C of each stream's data as written, and the problems found, one
// error a stream.
func (mc *momentChecks) report(m *busarchive.Manifest) (*busarchive.Report, map[string]uint32, []error) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	rep := &busarchive.Report{Streams: make([]busarchive.StreamReport, 0, len(m.Streams))}
	crcs := make(map[string]uint32, len(m.Streams))
	var problems []error
	for i := range m.Streams {
		sm := &m.Streams[i]
		c := mc.streams[sm.Name]
		if c == nil {
			problems = append(problems, fmt.Errorf("stream %s was not checked as it was written", sm.Name))
			continue
		}
		sr, n, err := c.data.Hold(sm, c.meta.Bytes())
		rep.Streams = append(rep.Streams, sr)
		rep.Bytes += n
		if err != nil {
			problems = append(problems, err)
			continue
		}
		crcs[sm.Name] = c.data.CRC()
	}
	return rep, crcs, problems
}

// stop ends every check (a write that failed).
func (mc *momentChecks) stop() {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for _, c := range mc.streams {
		c.data.Close()
	}
}

// checkedAsWritten is the verification of the moment's point at rel,
// written with manifest m, or its failure (a *kept.DamagedError): the
// point is then not to be committed.
func (k *Keeper) checkedAsWritten(mc *momentChecks, rel string, m *busarchive.Manifest) (*madePoint, error) {
	rep, crcs, problems := mc.report(m)
	if len(problems) > 0 {
		return nil, fmt.Errorf("the point of the moment was checked as it was written and %w, so it was not committed and nothing was set aside or removed",
			damagedAsWritten(k.abs(rel), problems))
	}
	return &madePoint{checked: rep, checkBegan: mc.began, checkEnded: k.now(), crcs: crcs}, nil
}

// damagedAsWritten is the problems a check as written found in the
// archive at path, one error a stream, as a damaged archive.
func damagedAsWritten(path string, problems []error) *kept.DamagedError {
	var said []string
	for _, err := range problems {
		said = append(said, problemSentences(err)...)
	}
	return &kept.DamagedError{Path: path, Problems: said}
}

// takeWritten takes made's verification, made as this request wrote the
// point, as the plan's, when made is the plan's very point (as committed),
// and reports whether it did. The CRC-32C of each stream as written is
// noted on the plan's archive, which its reads for the server check.
func (pl *restorePlan) takeWritten(made *madePoint) bool {
	if made == nil || made.checked == nil || made.Point == nil || pl.point == nil {
		return false
	}
	p, w := pl.point, made.Point
	if pl.pointRel != w.Dir || p.ArchiveSize != w.ArchiveSize || p.ArchiveSum != w.ArchiveSum || !p.Taken.Equal(w.Taken) {
		return false
	}
	pl.verified, pl.verifyBegan, pl.verifyEnded, pl.asWritten = made.checked, made.checkBegan, made.checkEnded, true
	for stream, crc := range made.crcs {
		pl.arch.NoteWritten(stream, crc)
	}
	return true
}
