package keeper

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/keeper/spool"
)

// MaxStreamParallel bounds Config.StreamParallel.
const MaxStreamParallel = 64

// DefaultStreamParallel is how many streams of one kept data a snapshot
// takes, and a restore restores, at once unless Config.StreamParallel says
// otherwise: one per core (GOMAXPROCS), at least 1 and at most 4. The server
// builds each stream's snapshot, and restores each stream, on a goroutine of
// its own, so a second stream uses a core the first leaves idle; and each
// snapshot may have a window of 8 MiB in flight to the keeper, so four keep
// one verb's windows at half the server's default max pending (64 MiB) for
// the keeper's connection.
func DefaultStreamParallel() int {
	return min(max(runtime.GOMAXPROCS(0), 1), 4)
}

// takeInTurn feeds each stream, one after the other, straight into the
// archive w, and returns the data bytes written.
func takeInTurn(ctx context.Context, w *busarchive.Writer, streams []string, take streamSource, p *Progress) (int64, error) {
	report := progressFrom(ctx)
	p.StreamsTotal = len(streams)
	var before int64
	for i, s := range streams {
		st, err := w.Stream(s)
		if err != nil {
			return 0, fmt.Errorf("archive stream %s: %w", s, err)
		}
		p.Stream, p.StreamsDone = s, i
		report(*p)
		data := progressWriter(st.Data(), before, p, report)
		if err := take(ctx, s, data, st.Meta()); err != nil {
			return 0, fmt.Errorf("snapshot of stream %s: %w", s, err)
		}
		if _, err := st.Finish(); err != nil {
			return 0, fmt.Errorf("archive stream %s: %w", s, err)
		}
		before += data.n
		p.Bytes = before
	}
	return before, nil
}

// progressWriter counts what passes into w and reports p every 8 MiB;
// before is what the step wrote until now.
func progressWriter(w io.WriteCloser, before int64, p *Progress, report func(Progress)) *countingWriter {
	return &countingWriter{w: w, tick: func(n int64) {
		if total := before + n; total-p.Bytes >= 8<<20 {
			p.Bytes = total
			report(*p)
		}
	}}
}

// takeAtOnce takes up to parallel of the streams at once, started in
// order, and writes them into the archive w in order: the first as it
// arrives, each later one from its spool (see package spool) once the ones
// before it are in. At the first failure it stops the others and returns
// it, naming the stream; the archive is then never committed. It returns
// the data bytes written.
func (k *Keeper) takeAtOnce(ctx context.Context, w *busarchive.Writer, streams []string, take streamSource, parallel int, p *Progress) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	spools := make([]*spool.Spool, len(streams))
	results := make([]chan error, len(streams))
	for i := range streams {
		spools[i] = spool.New(k.spools, k.spoolDir)
		results[i] = make(chan error, 1)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error // the first stream that failed, named
	)
	failed := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
			cancel()
		}
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, s := range spools {
			s.Close()
		}
	}()
	slots := make(chan struct{}, parallel)
	wg.Go(func() {
		for i, s := range streams {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				for j := i; j < len(streams); j++ {
					spools[j].Data().Close()
					results[j] <- ctx.Err()
				}
				return
			}
			wg.Go(func() {
				defer func() { <-slots }()
				data := spools[i].Data()
				defer data.Close() // the bus closes it too; a panic would not
				err := take(ctx, s, data, spools[i].Meta())
				if err != nil {
					failed(fmt.Errorf("snapshot of stream %s: %w", s, err))
				}
				results[i] <- err
			})
		}
	})

	report := progressFrom(ctx)
	p.StreamsTotal = len(streams)
	var before int64
	stop := func(err error) (int64, error) {
		failed(err)
		mu.Lock()
		defer mu.Unlock()
		return 0, first
	}
	buf := make([]byte, 256<<10)
	for i, s := range streams {
		st, err := w.Stream(s)
		if err != nil {
			return stop(fmt.Errorf("archive stream %s: %w", s, err))
		}
		p.Stream, p.StreamsDone = s, i
		report(*p)
		data := progressWriter(st.Data(), before, p, report)
		_, cerr := io.CopyBuffer(struct{ io.Writer }{data}, spools[i], buf)
		if err := <-results[i]; err != nil {
			return stop(fmt.Errorf("snapshot of stream %s: %w", s, err))
		}
		if cerr != nil {
			return stop(fmt.Errorf("archive stream %s: %w", s, cerr))
		}
		if _, err := st.Meta().Write(spools[i].MetaBytes()); err != nil {
			return stop(fmt.Errorf("archive stream %s: %w", s, err))
		}
		if _, err := st.Finish(); err != nil {
			return stop(fmt.Errorf("archive stream %s: %w", s, err))
		}
		if held := spools[i].Spooled(); held > 0 {
			k.log.Debug("stream snapshotted beside another and spooled until its turn", "stream", s, "spooled", held)
		}
		spools[i].Close()
		before += data.n
		p.Bytes = before
	}
	return before, nil
}
