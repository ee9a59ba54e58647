package keeper

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	t := k.newTakes(ctx, len(streams))
	defer t.close()
	t.start(streams, take, parallel)
	return t.archive(w, streams, p, k.log)
}

// takes is one takeAtOnce: a spool and a result for each stream, and the
// first stream that failed, named.
type takes struct {
	ctx     context.Context // ended at the first failure, or when the takes end
	cancel  context.CancelFunc
	spools  []*spool.Spool
	results []chan error

	wg    sync.WaitGroup
	mu    sync.Mutex
	first error // the first stream that failed, named
}

func (k *Keeper) newTakes(ctx context.Context, n int) *takes {
	t := &takes{spools: make([]*spool.Spool, n), results: make([]chan error, n)}
	t.ctx, t.cancel = context.WithCancel(ctx)
	for i := range n {
		t.spools[i] = spool.New(k.spools, k.spoolDir)
		t.results[i] = make(chan error, 1)
	}
	return t
}

// failed keeps err when it is the first failure, and stops the others.
func (t *takes) failed(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first == nil {
		t.first = err
		t.cancel()
	}
}

// close stops the takes still running, waits for them, and closes every
// spool.
func (t *takes) close() {
	t.cancel()
	t.wg.Wait()
	for _, s := range t.spools {
		s.Close()
	}
}

// start takes the streams into their spools, up to parallel at once, in
// order; the ones not begun when the takes are stopped end with its error.
func (t *takes) start(streams []string, take streamSource, parallel int) {
	slots := make(chan struct{}, parallel)
	t.wg.Go(func() {
		for i, s := range streams {
			select {
			case slots <- struct{}{}:
			case <-t.ctx.Done():
				for j := i; j < len(streams); j++ {
					t.spools[j].Data().Close()
					t.results[j] <- t.ctx.Err()
				}
				return
			}
			t.wg.Go(func() {
				defer func() { <-slots }()
				data := t.spools[i].Data()
				defer data.Close() // the bus closes it too; a panic would not
				err := take(t.ctx, s, data, t.spools[i].Meta())
				if err != nil {
					t.failed(fmt.Errorf("snapshot of stream %s: %w", s, err))
				}
				t.results[i] <- err
			})
		}
	})
}

// stop fails the takes with err and returns the first failure.
func (t *takes) stop(err error) (int64, error) {
	t.failed(err)
	t.mu.Lock()
	defer t.mu.Unlock()
	return 0, t.first
}

// archive writes each stream, in order, from its spool into the archive w
// once its take has ended, and returns the data bytes written.
func (t *takes) archive(w *busarchive.Writer, streams []string, p *Progress, log *slog.Logger) (int64, error) {
	report := progressFrom(t.ctx)
	p.StreamsTotal = len(streams)
	var before int64
	buf := make([]byte, 256<<10)
	for i, s := range streams {
		st, err := w.Stream(s)
		if err != nil {
			return t.stop(fmt.Errorf("archive stream %s: %w", s, err))
		}
		p.Stream, p.StreamsDone = s, i
		report(*p)
		data := progressWriter(st.Data(), before, p, report)
		_, cerr := io.CopyBuffer(struct{ io.Writer }{data}, t.spools[i], buf)
		if err := <-t.results[i]; err != nil {
			return t.stop(fmt.Errorf("snapshot of stream %s: %w", s, err))
		}
		if cerr != nil {
			return t.stop(fmt.Errorf("archive stream %s: %w", s, cerr))
		}
		if _, err := st.Meta().Write(t.spools[i].MetaBytes()); err != nil {
			return t.stop(fmt.Errorf("archive stream %s: %w", s, err))
		}
		if _, err := st.Finish(); err != nil {
			return t.stop(fmt.Errorf("archive stream %s: %w", s, err))
		}
		if held := t.spools[i].Spooled(); held > 0 {
			log.Debug("stream snapshotted beside another and spooled until its turn", "stream", s, "spooled", held)
		}
		t.spools[i].Close()
		before += data.n
		p.Bytes = before
	}
	return before, nil
}
