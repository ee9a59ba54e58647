package jsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Pending limits of the advisory subscriptions, whose advisories wait
// there until the next census takes them: past them (a bus busy making
// consumers while no verb runs) advisories are dropped, and the next census
// is a full one. An advisory is some 300 bytes.
const (
	advisoryPendingMsgs  = 8192
	advisoryPendingBytes = 4 << 20
)

// maxMarks bounds the streams and consumers the watch has heard of since the
// last census: past it the marks are dropped, as if their advisories were,
// and the next census is a full one.
const maxMarks = 16384

// The subjects of the advisories the watch hears: a stream created,
// updated (its mirror or sources may have changed), deleted or restored
// (and the other actions on a stream, which it passes over), a consumer created (on a cluster, a single-replica consumer
// updated too: its leader answers the update as a creation and sends the
// advisory again) or deleted. A consumer updated on a single server, or a
// replicated one, sends no consumer advisory (only the API audit advisory,
// which carries every API request and its reply, and which the keeper does
// not ask for): the book learns its new metadata when it lists its stream
// afresh (a census that wants a consumer there) or at the next full census,
// at most censusRefresh later.
var advisorySubjects = []string{
	"$JS.EVENT.ADVISORY.STREAM.*.*",
	"$JS.EVENT.ADVISORY.CONSUMER.CREATED.*.*",
	"$JS.EVENT.ADVISORY.CONSUMER.DELETED.*.*",
}

// censusWatch keeps the census book, who owns which consumer on the bus,
// from one full census and then from the server's advisories. An advisory
// is only a mark: the stream or the consumer it names is read afresh at the
// next census (resolve) and the book takes what the server holds then, so
// the marks need no order, and one read settles any number of advisories
// of the same consumer. A full census runs in the background, one at a
// time, shared by the censuses waiting for it (awaitFull).
type censusWatch struct {
	mu   sync.Mutex
	book *censusBook
	gen  uint64 // the book's generation: a full census puts in a new one
	// The marks: streams and consumers ({stream, consumer}) an advisory
	// named since they were last read. overflows counts the times they
	// passed maxMarks and were dropped.
	streams   map[string]bool
	consumers map[[2]string]bool
	overflows uint64
	// seeded is set once a full census has filled the book; reconnects,
	// dropped and overflows are the connection's reconnects and the
	// advisories and marks dropped when it began. While any has changed
	// since, advisories may have been missed, and the next census is a
	// full one.
	seeded     bool
	seededAt   time.Time
	reconnects uint64
	dropped    int
	overflowed uint64
	refresh    time.Duration // censusRefresh (tests shorten it)
	over       bool          // the last full census found more than maxCensusConsumers: every census lists every stream
	off        bool          // the advisories cannot be heard: every census lists every stream
	// full is the full census running, if any; redo collects what the
	// censuses read meanwhile, marked again once it is in (what it listed
	// may be older).
	full *censusFlight
	redo [][2]string

	nc      *nats.Conn
	log     *slog.Logger
	timeout time.Duration // of the flush
	subs    []*nats.Subscription
	drain   sync.Mutex // one catchUp at a time
}

// watchCensus subscribes to the advisories of censusWatch. One that cannot
// subscribe (the keeper's user may not, say) makes every census list every
// stream.
func (a *Adapter) watchCensus() *censusWatch {
	w := &censusWatch{book: newCensusBook(), streams: map[string]bool{}, consumers: map[[2]string]bool{},
		refresh: censusRefresh, nc: a.nc, log: a.log, timeout: a.cfg.timeout}
	for _, subject := range advisorySubjects {
		sub, err := a.nc.SubscribeSync(subject)
		if err == nil {
			err = sub.SetPendingLimits(advisoryPendingMsgs, advisoryPendingBytes)
		}
		if err != nil {
			a.log.Warn("cannot hear the server's advisories, so every census lists every stream", "subject", subject, "err", err)
			w.off = true
			return w
		}
		w.subs = append(w.subs, sub)
	}
	// A subscription the server refuses is refused after the fact: the
	// flush brings the refusal, if any, before its answer.
	err := a.nc.Flush()
	if last := a.nc.LastError(); err == nil && last != nil && strings.Contains(last.Error(), "$JS.EVENT.ADVISORY") {
		err = last
	}
	if err != nil {
		a.log.Warn("cannot hear the server's advisories, so every census lists every stream", "err", err)
		w.off = true
	}
	return w
}

// take takes every advisory the server sent before now into the marks: the
// flush's answer comes after them on the connection, so once it is in,
// they wait in the subscriptions' queues. On one server an advisory of a
// consumer is sent before the reply to the request that made it, so a
// consumer made before the census began is marked by then. (On a cluster
// another server may send it, later: the account's totals catch that one.)
// The caller holds drain.
func (w *censusWatch) take(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if err := w.nc.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("jsbus: flush before taking the advisories: %w", err)
	}
	for _, sub := range w.subs {
		n, _, err := sub.Pending()
		if err != nil {
			return fmt.Errorf("jsbus: the advisory subscription on %s is gone: %w", sub.Subject, err)
		}
		for range n {
			m, err := sub.NextMsg(time.Second)
			if errors.Is(err, nats.ErrSlowConsumer) {
				// Once after advisories were dropped (Dropped counts them):
				// the next call gives the next one. Left there, the queue
				// would stay full and every census be a full one.
				m, err = sub.NextMsg(time.Second)
			}
			if err != nil {
				return fmt.Errorf("jsbus: taking an advisory on %s: %w", sub.Subject, err)
			}
			w.heard(m.Subject)
		}
	}
	return nil
}

// heard marks what one advisory names. Its subject is
// $JS.EVENT.ADVISORY.<kind>.<action>.<stream>[.<consumer>]. Of a stream,
// only its creation, update, deletion and restore change what the book
// holds (nats-server's JSAdvisoryStream*Pre).
func (w *censusWatch) heard(subject string) {
	tokens := strings.Split(subject, ".")
	if len(tokens) < 6 {
		return
	}
	var read [2]string
	switch tokens[3] + "." + tokens[4] {
	case "STREAM.CREATED", "STREAM.UPDATED", "STREAM.DELETED", "STREAM.RESTORE_COMPLETE":
		read[0] = tokens[5]
	case "CONSUMER.CREATED", "CONSUMER.DELETED":
		if len(tokens) != 7 {
			return
		}
		read = [2]string{tokens[5], tokens[6]}
	default:
		return
	}
	if read[0] == "" || (len(tokens) == 7 && read[1] == "") {
		return // no name: no advisory the server sends
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mark(read)
	if len(w.streams)+len(w.consumers) > maxMarks {
		clear(w.streams)
		clear(w.consumers)
		w.overflows++
	}
}

// droppedNow is how many advisories the subscriptions have dropped.
func (w *censusWatch) droppedNow() int {
	n := 0
	for _, s := range w.subs {
		d, err := s.Dropped()
		if err != nil {
			return -1 // closed: as good as lost
		}
		n += d
	}
	return n
}

// trusted reports whether the book stands for the bus once the marks are
// read: the watch is on, seeded, within its bound, the connection has not
// reconnected and no advisory or mark was dropped since the full census.
func (w *censusWatch) trusted(reconnects uint64) bool {
	dropped := w.droppedNow()
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.off && !w.over && w.seeded && w.reconnects == reconnects && dropped >= 0 && w.dropped == dropped &&
		w.overflowed == w.overflows
}

// distrust makes the next census a full one.
func (w *censusWatch) distrust() {
	w.mu.Lock()
	w.seeded = false
	w.mu.Unlock()
}

// takeMarks empties the marks and gives them.
func (w *censusWatch) takeMarks() ([]string, [][2]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	streams := make([]string, 0, len(w.streams))
	for s := range w.streams {
		streams = append(streams, s)
	}
	consumers := make([][2]string, 0, len(w.consumers))
	for c := range w.consumers {
		if !w.streams[c[0]] { // its stream is read whole
			consumers = append(consumers, c)
		}
	}
	clear(w.streams)
	clear(w.consumers)
	return streams, consumers
}

// edit runs f on the book with the lock held. What f takes was read while
// the book was of generation gen: when a full census has been running or
// put a new book in since, what it read may be older than that census's
// list, and is marked to be read again (redo).
func (w *censusWatch) edit(gen uint64, read [2]string, f func(b *censusBook)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w.book)
	switch {
	case w.full != nil && len(w.redo) < maxMarks:
		w.redo = append(w.redo, read)
	case w.full != nil:
		w.overflows++ // too much read meanwhile: the book is made again
	case w.gen != gen:
		w.mark(read)
	}
}

// mark marks a stream ({stream, ""}) or a consumer to be read at the next
// census. The caller holds mu.
func (w *censusWatch) mark(read [2]string) {
	if read[1] == "" {
		w.streams[read[0]] = true
	} else {
		w.consumers[read] = true
	}
}

// generation is the book's generation: a full census puts in a new one.
func (w *censusWatch) generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}
