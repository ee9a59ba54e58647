package jsbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// censusFlight is one full census in the background; err is set before
// done is closed.
type censusFlight struct {
	done chan struct{}
	err  error
}

// startFull starts a full census in the background, unless one is running:
// either way it gives that one. It runs on its own context (fullCensusBudget),
// so that a verb that stops waiting for it does not stop it for the others.
func (a *Adapter) startFull() *censusFlight {
	w := a.census
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full != nil {
		return w.full
	}
	f := &censusFlight{done: make(chan struct{})}
	w.full = f
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), fullCensusBudget)
		defer cancel()
		f.err = a.fullCensus(ctx)
		close(f.done)
	}()
	return f
}

// awaitFull waits for a full census: the one running, or a new one.
func (a *Adapter) awaitFull(ctx context.Context) error {
	f := a.startFull()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("jsbus: census stopped while waiting for a full census: %w", ctx.Err())
	}
}

// fullCensus lists every stream, with its upstreams, and the consumers of
// each that has one (or whose count is not known), censusWorkers streams at
// once, into a new book, and puts it in (censusWatch.install). The advisories sent before it
// began are dropped unread (the lists show what they name); the marks of
// those heard meanwhile stay, to be read at the next census. Past maxCensusConsumers
// it stops, and every census lists every stream.
func (a *Adapter) fullCensus(ctx context.Context) error {
	w := a.census
	mark, dropped := a.connMark(), w.droppedNow()
	began := time.Now()
	err := func() error {
		overflows, err := w.forgetMarks(ctx)
		if err != nil {
			return err
		}
		book := newCensusBook()
		streams, err := a.streamsWith(ctx, func(s string, c upstreamConfig) { book.setUpstreams(s, a.upstreamsOf(c), true) })
		if err != nil {
			return err
		}
		var with []string
		for _, s := range streams {
			book.addStream(s.Name)
			if s.Consumers < 0 { // listed by name alone: its configuration was not read
				book.setUpstreams(s.Name, nil, false)
			}
			if s.Consumers != 0 {
				with = append(with, s.Name)
			}
		}
		var mu sync.Mutex
		err = forEach(ctx, with, func(ctx context.Context, s string) error {
			cs, gone, err := a.streamOwners(ctx, s)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if gone {
				book.dropStream(s)
			} else {
				book.setStream(s, cs)
			}
			if book.n > maxCensusConsumers {
				return errOverBound
			}
			return nil
		})
		over := errors.Is(err, errOverBound)
		if err != nil && !over {
			return err
		}
		w.install(book, over, mark, dropped, overflows)
		a.log.Debug("a full census: every stream was listed", "streams", len(streams), "consumers", book.n,
			"over the bound", over, "took", time.Since(began))
		return nil
	}()
	if err != nil {
		w.abort()
		a.log.Debug("a full census failed", "err", err, "took", time.Since(began))
		return fmt.Errorf("jsbus: a full census of the bus: %w", err)
	}
	return nil
}

// forgetMarks takes the advisories sent before now, and drops them and the
// marks unread, before a full census lists the bus: its lists show what
// they name. It gives the marks' overflows by then.
func (w *censusWatch) forgetMarks(ctx context.Context) (uint64, error) {
	w.drain.Lock()
	defer w.drain.Unlock()
	if err := w.take(ctx); err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.streams)
	clear(w.consumers)
	return w.overflows, nil
}

// install puts in the book a full census made, as of the connection's
// reconnects, the advisories dropped and the marks' overflows when it
// began; what the censuses read meanwhile is marked to be read again. A
// book over the bound is not kept: every census then lists every stream.
func (w *censusWatch) install(book *censusBook, over bool, reconnects uint64, dropped int, overflows uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if over {
		book = newCensusBook()
		w.log.Warn("the bus holds more consumers than the census book does, so every census lists every stream", "bound", maxCensusConsumers)
	}
	w.book, w.over, w.gen = book, over, w.gen+1
	w.seeded, w.seededAt = dropped >= 0, time.Now()
	w.reconnects, w.dropped, w.overflowed = reconnects, dropped, overflows
	w.full = nil
	w.markRedo()
}

// abort ends a full census that failed: the book stays as it was.
func (w *censusWatch) abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.full = nil
	w.markRedo()
}

// markRedo marks what the censuses read while a full census ran. The
// caller holds mu.
func (w *censusWatch) markRedo() {
	for _, r := range w.redo {
		w.mark(r)
	}
	w.redo = nil
}

// listsAll reports whether every census lists every stream: the watch
// cannot hear the advisories, or the bus holds more consumers than the
// book does.
func (w *censusWatch) listsAll() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.off || w.over
}

// stale reports whether the book is censusRefresh old and no full census
// is running.
func (w *censusWatch) stale() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seeded && w.full == nil && time.Since(w.seededAt) > w.refresh
}

// fits takes the consumers a census that listed every stream counted: a
// bus back within the bound makes the next census a full one, which keeps
// the book again.
func (w *censusWatch) fits(consumers int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over && consumers <= maxCensusConsumers {
		w.over, w.seeded = false, false
	}
}
