package keeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// countingWriter reports the bytes that pass through it.
type countingWriter struct {
	w    io.WriteCloser
	n    int64
	tick func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.tick(c.n)
	return n, err
}

func (c *countingWriter) Close() error { return c.w.Close() }

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

// releaseAfter is the archive size from which a snapshot or a restore gives
// its memory back to the system when it ends. Moving a large archive churns
// through the heap (nats.go allocates every snapshot chunk it receives); the
// Go runtime would return that memory only slowly, so the next large verb
// would start from a higher resident set. Returning it costs one collection.
const releaseAfter = 64 << 20

// writeArchive snapshots each stream into dir/bus.tar, which must not exist,
// and syncs it. It returns the manifest and the archive's size.
func (k *Keeper) writeArchive(ctx context.Context, dir string, streams []string, p Progress) (*busarchive.Manifest, int64, error) {
	path := filepath.Join(dir, archiveName)
	f, err := createExclusive(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	// Straight to the disk where the file system allows: the archive is read
	// back only by a verify or a restore, so the page cache would only cost.
	var out busarchive.File = f
	if df := busarchive.NewDirectFile(f); df != nil {
		defer df.Close()
		out = df
	}
	w := busarchive.NewWriter(out, busarchive.WriterInfo{
		KeeperVersion: k.version,
		ServerVersion: k.bus.ServerVersion(),
		Created:       k.now().UTC(),
	})
	report := progressFrom(ctx)
	p.StreamsTotal = len(streams)
	var before int64
	for i, s := range streams {
		sw, err := w.Stream(s)
		if err != nil {
			return nil, 0, fmt.Errorf("archive stream %s: %w", s, err)
		}
		p.Stream, p.StreamsDone = s, i
		report(p)
		data := &countingWriter{w: sw.Data(), tick: func(n int64) {
			if total := before + n; total-p.Bytes >= 8<<20 {
				p.Bytes = total
				report(p)
			}
		}}
		if err := k.bus.Snapshot(ctx, s, data, sw.Meta()); err != nil {
			return nil, 0, fmt.Errorf("snapshot of stream %s: %w", s, err)
		}
		if _, err := sw.Finish(); err != nil {
			return nil, 0, fmt.Errorf("archive stream %s: %w", s, err)
		}
		before += data.n
		p.Bytes = before
	}
	if before >= releaseAfter {
		defer debug.FreeOSMemory()
	}
	m, err := w.Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("commit archive: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if err := f.Close(); err != nil {
		return nil, 0, err
	}
	p.StreamsDone, p.Stream = len(streams), ""
	report(p)
	return m, fi.Size(), nil
}

// verifyArchive fully verifies dir/bus.tar and returns its manifest. Its
// error wraps ErrDamaged and lists every problem found.
func verifyArchive(ctx context.Context, dir string) (*busarchive.Manifest, *busarchive.Report, error) {
	a, c, err := openArchive(dir)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	rep, err := a.Verify(ctx)
	if err != nil {
		return nil, rep, &DamagedError{Path: filepath.Join(dir, archiveName), Problems: problemSentences(err)}
	}
	return a.Manifest(), rep, nil
}

// openArchive opens dir/bus.tar, which checks its layout and its manifest's
// seal without reading the streams' data. Its error is a *DamagedError (an
// archive that cannot be opened at all is reported incomplete).
func openArchive(dir string) (*busarchive.Archive, io.Closer, error) {
	path := filepath.Join(dir, archiveName)
	a, c, err := busarchive.OpenFile(path)
	if err != nil {
		if len(busarchive.Problems(err)) == 0 {
			err = &busarchive.EntryError{Kind: busarchive.ErrIncomplete, Detail: err.Error()}
		}
		return nil, nil, &DamagedError{Path: path, Problems: problemSentences(err)}
	}
	return a, c, nil
}

func problemSentences(err error) []string {
	var out []string
	for _, p := range busarchive.Problems(err) {
		out = append(out, p.Error())
	}
	if len(out) == 0 && err != nil {
		out = append(out, err.Error())
	}
	return out
}

// restoreParallel is how many streams of one archive restoreArchive
// restores at once. The server restores each stream in a goroutine of its
// own, so a second stream can use a core the first leaves idle.
const restoreParallel = 2

// restoreArchive restores the named streams of dir/bus.tar (all when only is
// nil), started in archive order, calling done after each; a whole archive
// is restored up to restoreParallel streams at once. At
// the first failure it starts no other stream, stops the ones in flight, and
// returns the streams it began (those not done maybe half-made).
//
// Each stream's data is checked while it is read for the bus
// (busarchive.CheckedStreamData): the server is sent only bytes that are
// hashed as they go, and the end of a stream's data, without which the
// server's restore cannot complete, only once its SHA-256 matches the
// manifest. A stream that fails so fails its restore with a *DamagedError.
func (k *Keeper) restoreArchive(ctx context.Context, dir string, only []string, p Progress, done func(stream string)) (begun []string, err error) {
	path := filepath.Join(dir, archiveName)
	a, c, err := openArchive(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if a.Manifest().Bytes() >= releaseAfter {
		defer debug.FreeOSMemory()
	}
	report := progressFrom(ctx)
	streams := a.Streams()
	if only != nil {
		var keep []string
		for _, s := range streams {
			if contains(only, s) {
				keep = append(keep, s)
			}
		}
		streams = keep
	}
	p.StreamsTotal = len(streams)
	p.BytesTotal, p.Bytes = 0, 0
	for _, ms := range a.Manifest().Streams {
		if contains(streams, ms.Name) {
			for _, e := range ms.Entries {
				if strings.HasSuffix(e.Name, "/"+busarchive.DataName) {
					p.BytesTotal += e.Size
				}
			}
		}
	}
	// Only a whole archive is restored several streams at once; put-backs
	// and journaled restores name their streams and go one at a time, in
	// order, as their journal expects.
	parallel := 1
	if only == nil {
		parallel = restoreParallel
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex // guards begun, failed, panicked, p and the calls of report and done
		failed   error
		panicked any // a Bus panic, raised again in the caller's goroutine
		wg       sync.WaitGroup
		slots    = make(chan struct{}, parallel)
		finished = p.StreamsDone
		reported int64
	)
	fail := func(err error) {
		if failed == nil {
			failed = err
			cancel()
		}
	}
	for _, s := range streams {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		mu.Lock()
		if failed == nil && ctx.Err() != nil {
			fail(ctx.Err())
		}
		if failed != nil {
			mu.Unlock()
			break
		}
		data, err := a.CheckedStreamData(ctx, s)
		if err != nil {
			if len(busarchive.Problems(err)) > 0 {
				err = &DamagedError{Path: path, Problems: problemSentences(err)}
			}
			fail(fmt.Errorf("stream %s was not restored: %w", s, err))
			mu.Unlock()
			break
		}
		meta, err := a.StreamMeta(s)
		if err != nil {
			data.Close()
			fail(err)
			mu.Unlock()
			break
		}
		begun = append(begun, s)
		p.Stream = s
		report(p)
		mu.Unlock()
		counted := &countingReader{r: data, tick: func(n int64) {
			mu.Lock()
			defer mu.Unlock()
			if p.Bytes += n; p.Bytes-reported >= 8<<20 {
				reported = p.Bytes
				report(p)
			}
		}}
		wg.Go(func() {
			defer func() { <-slots }()
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					defer mu.Unlock()
					if panicked == nil {
						panicked = r
					}
					fail(fmt.Errorf("restore of stream %s panicked", s))
				}
			}()
			began := time.Now()
			err := k.bus.Restore(ctx, s, counted, meta)
			if err == nil {
				// A bus that stopped reading early has not had the data's
				// end, so not its verification: read to the end to have it.
				_, err = io.Copy(io.Discard, counted)
			}
			data.Close()
			meta.Close()
			mu.Lock()
			defer mu.Unlock()
			if ps := busarchive.Problems(err); len(ps) > 0 {
				fail(fmt.Errorf("restore of stream %s stopped before its end: %w", s,
					&DamagedError{Path: path, Problems: problemSentences(err)}))
				return
			}
			if err != nil {
				if errors.Is(err, ErrConflict) {
					// The server refused before creating anything: the
					// stream on the bus is someone else's, not half of
					// this restore, and must not be removed as if it were.
					begun = slices.DeleteFunc(begun, func(b string) bool { return b == s })
				}
				fail(fmt.Errorf("restore of stream %s: %w", s, err))
				return
			}
			k.log.Debug("stream restored and its data verified as it was read", "stream", s, "archive", path, "took", time.Since(began))
			finished++
			p.StreamsDone = finished
			if done != nil {
				done(s)
			}
		})
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
	if failed != nil {
		return begun, failed
	}
	p.StreamsDone, p.Stream = finished, ""
	report(p)
	return begun, nil
}

// ErrDamaged is wrapped by errors about archives that fail verification.
var ErrDamaged = errors.New("archive is damaged")

// DamagedError lists every problem found in one archive.
type DamagedError struct {
	Path     string
	Problems []string
}

func (e *DamagedError) Error() string {
	s := fmt.Sprintf("%s failed verification with %d problem(s)", e.Path, len(e.Problems))
	for i, p := range e.Problems {
		if i == 5 {
			s += fmt.Sprintf("; and %d more", len(e.Problems)-5)
			break
		}
		s += "; " + p
	}
	return s
}

func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, ErrFailed} }
