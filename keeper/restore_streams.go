package keeper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// restore restores the point's streams that are left, up to x.parallel at
// once. A stream of such a name on the bus now is one a stopped restore
// began, or one a module made meanwhile: recovery set it aside, and it goes
// only if that copy holds it as it stands.
func (x *restoreRun) restore(ctx context.Context) error {
	j := x.j
	var left []string
	for _, s := range j.Restore {
		if contains(j.Restored, s) {
			continue
		}
		if err := x.removeCovered(ctx, x.asides, s); err != nil {
			return fmt.Errorf("stream %s is in the way of the restore: %w", s, err)
		}
		left = append(left, s)
	}
	if len(left) == 0 {
		return nil
	}
	bases, err := x.openBases(ctx)
	if err != nil {
		return err
	}
	defer closeBases(bases)
	for try := 1; ; try++ {
		begun, err := x.restoreArchive(ctx, x.arch, left, j.Overrides,
			Progress{Verb: VerbRestore, Module: j.Module, Local: j.Local, Step: "restore",
				StreamsDone: len(j.Restored), StreamsTotal: len(j.Restore)}, func(s string) {
				j.Restored = append(j.Restored, s)
				if err := x.journals.save(ctx, j); err != nil {
					// Recovery would restore this stream again: safe, only slower.
					x.log.Warn("could not record a restored stream in the restore journal", "stream", s, "err", err)
				}
				x.step("restored:" + s)
			}, bases)
		// Every stream this run began, finished or not, is removed if the
		// run gives up: the aside is then put back whole.
		x.here = append(x.here, begun...)
		if err == nil {
			return nil
		}
		again := errors.Is(err, ErrNoBus) || errors.Is(err, ErrStaleStream)
		if try == busTries || !again || ctx.Err() != nil || !x.removeUnfinished(ctx, begun) {
			return fmt.Errorf("restoring from %s failed: %w", sourceName(x.point), err)
		}
		// The bus went away part way (a server of the cluster died), or
		// the server still held files of a stream removed just before: what
		// this try began and did not finish is removed; begin those again.
		x.log.Warn("a restore was cut short by the bus or by files the server had not yet removed; restoring the unfinished streams again", "try", try, "err", err)
		left = slices.DeleteFunc(left, func(s string) bool { return contains(j.Restored, s) })
		select {
		case <-ctx.Done():
			return fmt.Errorf("restoring from %s failed: %w", sourceName(x.point), err)
		case <-time.After(min(time.Duration(try)*time.Second, busPauseMax)):
		}
	}
}

// removeUnfinished removes the streams of begun that the run did not finish
// restoring (a server that lost the restore may have removed them itself),
// and reports whether none is left.
func (x *restoreRun) removeUnfinished(ctx context.Context, begun []string) bool {
	for _, s := range begun {
		if contains(x.j.Restored, s) {
			continue
		}
		if err := x.bus.DeleteStream(ctx, s); err != nil && !errors.Is(err, ErrNoStream) {
			x.log.Warn("could not remove a half-restored stream to restore it again", "stream", s, "err", err)
			return false
		}
	}
	return true
}

// restoreArchive restores the named streams of the opened archive a (all
// when only is nil), started in archive order, up to rp.parallel at once,
// calling done after each (under a lock, one call at a time). At the first
// failure it starts no other stream, stops the ones in flight, and returns
// the streams it began (those not done maybe half-made).
//
// Each stream's data is checked while it is read for the bus
// (busarchive.CheckedStreamData): the server is sent only bytes that are
// hashed as they go, and the end of a stream's data, without which the
// server's restore cannot complete, only once its SHA-256 matches the
// manifest. A stream that fails so fails its restore with a *DamagedError.
//
// bases, by stream, are the base points of the streams of a that hold only
// a delta's tail: such a stream is sent whole, its base point's messages
// and then the tail's (composeTail); nil for none.
func (rp runPorts) restoreArchive(ctx context.Context, a *openedArchive, only []string, ov *Overrides, p Progress, done func(stream string), bases map[string]*openedArchive) (begun []string, err error) {
	if a.Manifest().Bytes() >= releaseAfter {
		defer debug.FreeOSMemory()
	}
	report := progressFrom(ctx)
	streams := chosenStreams(a, only)
	p.StreamsTotal = len(streams)
	p.BytesTotal, p.Bytes = streamDataBytes(a.Manifest(), streams), 0
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sr := &streamsRestore{rp: rp, a: a, bases: bases, ov: ov, done: done, report: report, cancel: cancel,
		slots: make(chan struct{}, max(rp.parallel, 1)), p: p, finished: p.StreamsDone}
	for _, s := range streams {
		select {
		case sr.slots <- struct{}{}:
		case <-ctx.Done():
		}
		if !sr.begin(ctx, s) {
			break
		}
	}
	sr.wg.Wait()
	if sr.panicked != nil {
		panic(sr.panicked)
	}
	if sr.failed != nil {
		return sr.begun, sr.failed
	}
	sr.p.StreamsDone, sr.p.Stream = sr.finished, ""
	report(sr.p)
	return sr.begun, nil
}

// chosenStreams is the archive's streams that only names (all when only is
// nil), in archive order.
func chosenStreams(a *openedArchive, only []string) []string {
	streams := a.Streams()
	if only == nil {
		return streams
	}
	var keep []string
	for _, s := range streams {
		if contains(only, s) {
			keep = append(keep, s)
		}
	}
	return keep
}

// streamDataBytes is the size of the data entries of the named streams.
func streamDataBytes(m *busarchive.Manifest, streams []string) int64 {
	var n int64
	for _, ms := range m.Streams {
		if contains(streams, ms.Name) {
			for _, e := range ms.Entries {
				if strings.HasSuffix(e.Name, "/"+busarchive.DataName) {
					n += e.Size
				}
			}
		}
	}
	return n
}

// streamsRestore is one restoreArchive under way: what the restores of its
// streams, each in its own goroutine, share.
type streamsRestore struct {
	rp     runPorts
	a      *openedArchive
	bases  map[string]*openedArchive // see restoreArchive
	ov     *Overrides
	done   func(stream string)
	report func(Progress)
	cancel context.CancelFunc
	slots  chan struct{} // one per stream being restored
	wg     sync.WaitGroup

	mu       sync.Mutex // guards what follows, and the calls of report and done
	p        Progress
	begun    []string
	failed   error
	panicked any // a Bus panic, raised again in the caller's goroutine
	finished int
	reported int64
}

// fail keeps the first failure and stops every stream in flight. Hold mu.
func (sr *streamsRestore) fail(err error) {
	if sr.failed == nil {
		sr.failed = err
		sr.cancel()
	}
}

// begin opens stream s's data and meta and starts its restore, in a slot
// already taken. It returns false when the restore fails and no other
// stream may start.
func (sr *streamsRestore) begin(ctx context.Context, s string) bool {
	sr.mu.Lock()
	if sr.failed == nil && ctx.Err() != nil {
		sr.fail(ctx.Err())
	}
	if sr.failed != nil {
		sr.mu.Unlock()
		return false
	}
	data, meta, err := sr.open(ctx, s)
	if err != nil {
		if len(busarchive.Problems(err)) > 0 {
			err = &DamagedError{Path: sr.a.Where, Problems: problemSentences(err)}
		}
		sr.fail(fmt.Errorf("stream %s was not restored: %w", s, err))
		sr.mu.Unlock()
		return false
	}
	sr.begun = append(sr.begun, s)
	sr.p.Stream = s
	sr.report(sr.p)
	sr.mu.Unlock()
	sent, sentMeta, err := overridden(sr.ov, &countingReader{r: data, tick: sr.tick}, meta)
	if err != nil {
		data.Close()
		meta.Close()
		sr.mu.Lock()
		sr.fail(fmt.Errorf("stream %s was not restored: its overrides (%s): %w", s, sr.ov, err))
		sr.mu.Unlock()
		return false
	}
	sr.wg.Go(func() {
		defer func() { <-sr.slots }()
		defer sr.recovered(s)
		sr.restoreOne(ctx, s, sent, sentMeta, data, meta)
	})
	return true
}

// open is stream s's data, checked as it is read, and its backup.json:
// the archive's, or, for a tail, the stream composed whole (composeTail).
func (sr *streamsRestore) open(ctx context.Context, s string) (data, meta io.ReadCloser, err error) {
	if base := sr.bases[s]; base != nil {
		return composeTail(ctx, base, sr.a, s)
	}
	if data, err = sr.a.CheckedStreamData(ctx, s); err != nil {
		return nil, nil, err
	}
	if meta, err = sr.a.StreamMeta(s); err != nil {
		data.Close()
		return nil, nil, err
	}
	return data, meta, nil
}

// tick counts n more bytes read, and reports every 8 MiB.
func (sr *streamsRestore) tick(n int64) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if sr.p.Bytes += n; sr.p.Bytes-sr.reported >= 8<<20 {
		sr.reported = sr.p.Bytes
		sr.report(sr.p)
	}
}

// recovered keeps a panic of the Bus in stream s's restore, to raise it
// again in the caller's goroutine. Deferred.
func (sr *streamsRestore) recovered(s string) {
	if r := recover(); r != nil {
		sr.mu.Lock()
		defer sr.mu.Unlock()
		if sr.panicked == nil {
			sr.panicked = r
		}
		sr.fail(fmt.Errorf("restore of stream %s panicked", s))
	}
}

// restoreOne sends stream s to the bus and closes what it read from.
func (sr *streamsRestore) restoreOne(ctx context.Context, s string, sent io.ReadCloser, sentMeta io.Reader, data, meta io.Closer) {
	began := time.Now()
	err := sr.rp.bus.Restore(ctx, s, sent, sentMeta)
	if err == nil {
		// A bus that stopped reading early has not had the data's
		// end, so not its verification: read to the end to have it.
		_, err = io.Copy(io.Discard, sent)
	}
	sent.Close()
	data.Close()
	meta.Close()
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if ps := busarchive.Problems(err); len(ps) > 0 {
		sr.fail(fmt.Errorf("restore of stream %s stopped before its end: %w", s,
			&DamagedError{Path: sr.a.Where, Problems: problemSentences(err)}))
		return
	}
	if err != nil {
		if errors.Is(err, ErrConflict) {
			// The server refused before creating anything: the
			// stream on the bus is someone else's, not half of
			// this restore, and must not be removed as if it were.
			sr.begun = slices.DeleteFunc(sr.begun, func(b string) bool { return b == s })
		}
		sr.fail(fmt.Errorf("restore of stream %s: %w", s, err))
		return
	}
	sr.rp.log.Debug("stream restored and its data verified as it was read", "stream", s, "archive", sr.a.Where, "took", time.Since(began))
	sr.finished++
	sr.p.StreamsDone = sr.finished
	if sr.done != nil {
		sr.done(s)
	}
}

// countingReader reports each read's byte count.
type countingReader struct {
	r    io.Reader
	tick func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.tick(int64(n))
	}
	return n, err
}

// The streams of an aside that hold a delta's tail are sent whole: see
// checkTails (restore_method.go).

// openBases opens, for each stream of the run's source that holds a tail,
// the archive of its base point; close them with closeBases.
func (x *restoreRun) openBases(ctx context.Context) (map[string]*openedArchive, error) {
	bases := map[string]*openedArchive{}
	if x.point == nil {
		return bases, nil
	}
	for _, st := range x.point.Streams {
		if st.Base == "" || !contains(x.j.Restore, st.Name) {
			continue
		}
		rec, err := x.records.readHead(ctx, st.Base)
		if err == nil {
			var a *openedArchive
			if a, err = x.records.openArchive(ctx, st.Base, rec); err == nil {
				bases[st.Name] = a
				if bm, tm := a.Manifest().Stream(st.Name), x.arch.Manifest().Stream(st.Name); bm != nil && tm != nil {
					if x.composed == nil {
						x.composed = map[string]busarchive.ArchiveHead{}
					}
					x.composed[st.Name] = composedState(bm, tm)
				}
				continue
			}
		}
		closeBases(bases)
		return nil, fmt.Errorf("point %s, which the tail of stream %s follows, cannot be read: %w", st.Base, st.Name, err)
	}
	return bases, nil
}

func closeBases(bases map[string]*openedArchive) {
	for _, a := range bases {
		a.Close()
	}
}

// composedState is the state of stream s put back whole from its base
// point's manifest and its tail's.
func composedState(base, tail *busarchive.StreamManifest) busarchive.ArchiveHead {
	b, t := base.State, tail.State
	h := busarchive.ArchiveHead{FirstSeq: b.FirstSeq, LastSeq: t.LastSeq, Msgs: b.Msgs + t.Msgs, Bytes: b.Bytes + t.Bytes}
	if b.Msgs == 0 {
		h.FirstSeq = t.FirstSeq
	}
	return h
}

// composeTail is stream s's archive and backup.json put back whole: the
// base point's messages, then the tail's, each archive checked against its
// manifest as it is read (a damaged one fails the read). The
// configuration is the tail's (the live one when it was set aside).
func composeTail(ctx context.Context, base, tail *openedArchive, s string) (io.ReadCloser, io.ReadCloser, error) {
	bm, tm := base.Manifest().Stream(s), tail.Manifest().Stream(s)
	if bm == nil || tm == nil {
		return nil, nil, fmt.Errorf("stream %s is not in both its base point and its tail", s)
	}
	head := composedState(bm, tm)
	meta, err := tail.StreamMeta(s)
	if err != nil {
		return nil, nil, err
	}
	doc, err := io.ReadAll(io.LimitReader(meta, busarchive.MaxMetaSize))
	meta.Close()
	if err != nil {
		return nil, nil, err
	}
	cfg, subjects, err := configOf(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("the tail of stream %s: %w", s, err)
	}
	whole, err := tailMeta(cfg, head, 0, 0, subjects)
	if err != nil {
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeComposed(ctx, pw, head, base, tail, s))
	}()
	return pr, io.NopCloser(bytes.NewReader(whole)), nil
}

// writeComposed writes the composed archive of stream s into w.
func writeComposed(ctx context.Context, w io.Writer, head busarchive.ArchiveHead, base, tail *openedArchive, s string) error {
	aw, err := busarchive.NewStreamArchiveWriter(w, head)
	if err != nil {
		return err
	}
	for _, a := range []*openedArchive{base, tail} {
		r, err := a.CheckedStreamData(ctx, s)
		if err != nil {
			return err
		}
		_, err = busarchive.ReadStreamArchive(r, nil, aw.Message)
		if err == nil {
			_, err = io.Copy(io.Discard, r) // to its end, so its checksum is checked
		}
		r.Close()
		if err != nil {
			return fmt.Errorf("reading stream %s from %s: %w", s, a.Where, err)
		}
	}
	return aw.Close()
}

// configOf is the configuration a backup.json holds, and its subjects.
func configOf(doc []byte) (json.RawMessage, uint64, error) {
	var m struct {
		Config json.RawMessage `json:"config"`
		State  struct {
			Subjects uint64 `json:"num_subjects"`
		} `json:"state"`
	}
	if err := json.Unmarshal(doc, &m); err != nil || len(m.Config) == 0 {
		return nil, 0, fmt.Errorf("its backup.json holds no configuration (%v)", err)
	}
	return m.Config, m.State.Subjects, nil
}
