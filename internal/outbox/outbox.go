// Package outbox keeps the keeper's acts that the bus cannot take now, on
// disk in the keeper's directory, and delivers them in order when it takes
// them again: at least once, each with its own id as its Nats-Msg-Id, so
// that the acts stream's duplicate window stores a replay once.
//
// A Queue wraps any keeper.Acts (the jsbus adapter in a keeper) and is a
// keeper.ActsQueue and a keeper.ActsBacklog. Record, for an act that must be
// acknowledged before the verb goes on (an intent before a removal), never
// queues: it delivers what is queued before it, then the act, or fails.
// Queue writes the act to disk first (temp file, fsync, rename, fsync of the
// directory) and hands it to a drainer that delivers the queue head first,
// with a bounded pause between failed tries; it waits a little for that
// delivery so that, while the bus takes acts, the act is on the bus when the
// verb replies. The queue is bounded in acts and in bytes: an act past the
// bound is dropped, counted and logged at error level.
//
// The queue lives here, a leaf beside the keeper, not in jsbus: it is the
// keeper's disk, not the NATS wire, and wrapping keeper.Acts lets it work
// with any recorder (fault tests inject a bus that refuses).
//
// It may import keeper (the Acts port it wraps) and nothing else of this
// module.
package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// Defaults of Options.
const (
	DefaultMaxActs  = 10000    // acts queued at most
	DefaultMaxBytes = 64 << 20 // bytes of queued acts at most
	// DefaultWait is how long Queue waits for its act to be delivered
	// while the bus takes acts (it does not wait once a try has failed).
	DefaultWait = 5 * time.Second
	// DefaultTry bounds one delivery try (the recorder retries within it).
	DefaultTry = 30 * time.Second
	// DefaultMaxPause is the longest pause between failed tries; the first
	// is firstPause, and each one after doubles.
	DefaultMaxPause = 30 * time.Second
	firstPause      = 500 * time.Millisecond
)

// ErrFull is wrapped by the error of an act dropped because the queue's
// bound was reached.
var ErrFull = errors.New("the acts queue is full")

// Options bound a Queue; zero fields take the defaults.
type Options struct {
	MaxActs  int           // acts queued at most
	MaxBytes int64         // bytes of queued act files at most
	Wait     time.Duration // how long Queue waits for delivery while the bus takes acts
	Try      time.Duration // bound of one delivery try
	MaxPause time.Duration // longest pause between failed tries
	Logger   *slog.Logger  // nil: slog.Default()
}

// Queue is an on-disk queue of acts in front of a keeper.Acts.
type Queue struct {
	dir  string
	acts keeper.Acts
	opt  Options
	log  *slog.Logger

	deliver sync.Mutex // one delivery at a time, in order

	mu       sync.Mutex // guards what follows
	entries  []entry    // queued, oldest first
	bytes    int64      // their files' sizes
	next     uint64     // the sequence of the next act queued
	doneSeq  uint64     // the highest sequence taken off the queue
	failures uint64     // failed delivery tries so far
	stalled  bool       // the last try failed
	changed  chan struct{}

	dropped atomic.Uint64
	kick    chan struct{}
	cancel  context.CancelFunc
	stopped chan struct{}
}

// entry is one queued act's file.
type entry struct {
	seq  uint64
	size int64
}

// Open opens (making it, 0700, if missing) the queue directory dir, which
// must be a directory of its own (not a symlink, closed to group and
// other), loads the acts queued in it, and starts delivering them to acts,
// oldest first. A queue file that does not read as an act is set aside
// (renamed *.damaged, kept for a person) and logged at error level; it is
// never delivered nor removed. Close stops the delivery.
func Open(dir string, acts keeper.Acts, o Options) (*Queue, error) {
	if o.MaxActs <= 0 {
		o.MaxActs = DefaultMaxActs
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Try <= 0 {
		o.Try = DefaultTry
	}
	if o.MaxPause <= 0 {
		o.MaxPause = DefaultMaxPause
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := ownDir(dir); err != nil {
		return nil, err
	}
	q := &Queue{dir: dir, acts: acts, opt: o, log: o.Logger, next: 1, changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	if err := q.load(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel, q.stopped = cancel, make(chan struct{})
	go q.run(ctx)
	if n := len(q.entries); n > 0 {
		q.log.Warn("acts wait in the queue from before; delivering them", "dir", dir, "acts", n, "bytes", q.bytes)
	}
	return q, nil
}

// ownDir makes dir 0700 if missing and checks it is a directory, not a
// symlink, closed to group and other.
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("the acts queue directory %s could not be made: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the acts queue directory %s cannot be read: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("the acts queue %s is not a directory (a symlink or a file), so no act would be kept there; remove it and start again", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("the acts queue directory %s is open to group or other (mode %04o), so acts would not be private; chmod 0700 it and start again", dir, st.Mode().Perm())
	}
	return nil
}

// load reads the queue directory: leftover temporary files go (an act whose
// write never finished was never reported queued), files that do not read
// as an act are set aside, and the rest are the queue.
func (q *Queue) load() error {
	des, err := os.ReadDir(q.dir)
	if err != nil {
		return fmt.Errorf("the acts queue directory %s cannot be listed: %w", q.dir, err)
	}
	damaged := 0
	for _, de := range des {
		name := de.Name()
		if isTemp(name) {
			q.log.Warn("removing an act file whose write never finished (the keeper stopped while writing it; it was never reported queued)", "file", filepath.Join(q.dir, name))
			if err := os.Remove(filepath.Join(q.dir, name)); err != nil {
				return fmt.Errorf("a leftover temporary act file %s could not be removed: %w", filepath.Join(q.dir, name), err)
			}
			continue
		}
		if isSetAside(name) {
			damaged++
			continue
		}
		seq, ok := parseName(name)
		if !ok {
			q.log.Warn("a file in the acts queue directory is not the queue's; it is left alone", "file", filepath.Join(q.dir, name))
			continue
		}
		b, err := readFile(q.dir, name)
		if err == nil {
			_, err = decodeEntry(b)
		}
		if err != nil {
			q.setAside(name, err)
			damaged++
			continue
		}
		q.entries = append(q.entries, entry{seq: seq, size: int64(len(b))})
		q.bytes += int64(len(b))
		q.next = max(q.next, seq+1)
	}
	slices.SortFunc(q.entries, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	if damaged > 0 {
		q.log.Error("set-aside act files wait in the acts queue for a person: they were not delivered; read them, record what they say, then remove them",
			"dir", q.dir, "files", damaged)
	}
	return nil
}

// setAside renames a queue file that cannot be delivered to *.damaged, so
// that it is kept for a person and never read again, and logs it.
func (q *Queue) setAside(name string, why error) {
	from := filepath.Join(q.dir, name)
	q.log.Error("an act file in the queue does not read as an act; it is set aside, not delivered, and kept for a person",
		"file", from, "to", from+damagedSuffix, "err", why)
	if err := os.Rename(from, from+damagedSuffix); err != nil {
		q.log.Error("the damaged act file could not be set aside; it stays where it is", "file", from, "err", err)
		return
	}
	_ = syncDir(q.dir)
}

// Close stops the delivery and waits for it. What is queued stays on disk;
// the next Open delivers it.
func (q *Queue) Close() error {
	q.cancel()
	<-q.stopped
	return nil
}

// ActsQueued is how many acts wait in the queue.
func (q *Queue) ActsQueued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.entries)
}

// ActsDropped is how many acts were dropped because the queue was full,
// since Open.
func (q *Queue) ActsDropped() uint64 { return q.dropped.Load() }

var (
	_ keeper.ActsQueue   = (*Queue)(nil)
	_ keeper.ActsBacklog = (*Queue)(nil)
)

// Record delivers a and returns only once the bus acknowledged it, never
// queuing it: it first delivers every act queued before it, in order, and
// fails, leaving a unrecorded, if they cannot be.
func (q *Queue) Record(ctx context.Context, a keeper.Act) error {
	q.deliver.Lock()
	defer q.deliver.Unlock()
	for {
		more, err := q.deliverHead(ctx)
		if err != nil {
			return fmt.Errorf("the %d act(s) queued before it could not be delivered (%w), so it was not recorded either", q.ActsQueued(), err)
		}
		if !more {
			break
		}
	}
	return q.acts.Record(ctx, a)
}

// Queue writes a to disk behind every act queued before it and hands it to
// the drainer; while the bus takes acts it waits up to Options.Wait for a
// to be delivered. It returns nil once a is kept on disk (or, when the disk
// refused it, recorded on the bus). A full queue drops a: counted, logged,
// and an error wrapping ErrFull.
func (q *Queue) Queue(ctx context.Context, a keeper.Act) error {
	b, err := encodeEntry(a)
	if err != nil {
		return fmt.Errorf("the %s act could not be queued: %w", a.Verb, err)
	}
	q.mu.Lock()
	if len(q.entries) >= q.opt.MaxActs || q.bytes+int64(len(b)) > q.opt.MaxBytes {
		n, bytes := len(q.entries), q.bytes
		q.mu.Unlock()
		q.dropped.Add(1)
		q.log.Error("the acts queue is full, so this act is dropped: it is only in this log",
			"id", a.ID, "verb", a.Verb, "module", a.Module, "local", a.Local, "caller", a.Caller, "why", a.Why,
			"outcome", a.Outcome, "what", a.What, "time", a.Time, "queued", n, "queued_bytes", bytes,
			"max_acts", q.opt.MaxActs, "max_bytes", q.opt.MaxBytes)
		return fmt.Errorf("the %s act %s was dropped: %w (%d acts, %d bytes; bound %d acts, %d bytes) while the bus does not take acts", a.Verb, a.ID, ErrFull, n, bytes, q.opt.MaxActs, q.opt.MaxBytes)
	}
	seq := q.next
	if err := writeEntry(q.dir, seq, b); err != nil {
		q.mu.Unlock()
		q.log.Error("the act could not be written to the acts queue; recording it on the bus at once instead", "id", a.ID, "verb", a.Verb, "err", err)
		tctx, cancel := context.WithTimeout(ctx, q.opt.Try)
		defer cancel()
		if rerr := q.acts.Record(tctx, a); rerr != nil {
			q.dropped.Add(1)
			q.log.Error("the act could be neither queued nor recorded, so it is dropped: it is only in this log",
				"id", a.ID, "verb", a.Verb, "module", a.Module, "local", a.Local, "outcome", a.Outcome, "what", a.What, "err", rerr)
			return fmt.Errorf("the %s act %s could not be written to the acts queue (%w) nor recorded on the bus (%w), so it is dropped", a.Verb, a.ID, err, rerr)
		}
		return nil
	}
	q.next++
	q.entries = append(q.entries, entry{seq: seq, size: int64(len(b))})
	q.bytes += int64(len(b))
	stalled, failures := q.stalled, q.failures
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
	if !stalled {
		q.waitDelivered(ctx, seq, failures)
	}
	return nil
}

// waitDelivered waits until seq is off the queue, a delivery try fails
// after failures, ctx ends or Options.Wait passes.
func (q *Queue) waitDelivered(ctx context.Context, seq, failures uint64) {
	t := time.NewTimer(q.opt.Wait)
	defer t.Stop()
	for {
		q.mu.Lock()
		done, failed, ch := q.doneSeq >= seq, q.failures > failures, q.changed
		q.mu.Unlock()
		if done || failed {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// run delivers the queue until ctx ends: at once when kicked, and after a
// failed try again after a pause that doubles up to Options.MaxPause.
func (q *Queue) run(ctx context.Context) {
	defer close(q.stopped)
	pause := firstPause
	for {
		err := q.drain(ctx)
		if ctx.Err() != nil {
			return
		}
		var wait <-chan time.Time
		if err != nil {
			q.log.Warn("the bus does not take acts now; they stay queued and are tried again", "queued", q.ActsQueued(), "pause", pause, "err", err)
			wait = time.After(pause)
			pause = min(2*pause, q.opt.MaxPause)
		} else {
			pause = firstPause
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		case <-q.kick:
			if wait != nil { // a pause is a pause: a new act does not cut it
				select {
				case <-ctx.Done():
					return
				case <-wait:
				}
			}
		}
	}
}

// drain delivers the queue, oldest first, until it is empty or a try
// fails.
func (q *Queue) drain(ctx context.Context) error {
	for {
		q.deliver.Lock()
		more, err := q.deliverHead(ctx)
		q.deliver.Unlock()
		if err != nil || !more {
			return err
		}
	}
}

// deliverHead delivers the oldest queued act, with q.deliver held, and
// takes it off the queue; more says whether an act was there. A file that
// no longer reads as an act, and an act the recorder refuses as it stands
// (keeper.ErrBadRequest: it never will take it), are set aside.
func (q *Queue) deliverHead(ctx context.Context) (more bool, err error) {
	q.mu.Lock()
	if len(q.entries) == 0 {
		q.mu.Unlock()
		return false, nil
	}
	head := q.entries[0]
	q.mu.Unlock()
	name := entryName(head.seq)
	b, err := readFile(q.dir, name)
	var a keeper.Act
	if err == nil {
		a, err = decodeEntry(b)
	}
	if err != nil {
		q.setAside(name, err)
		q.pop(head)
		return true, nil
	}
	tctx, cancel := context.WithTimeout(ctx, q.opt.Try)
	err = q.acts.Record(tctx, a)
	cancel()
	if errors.Is(keeper.KindOf(err), keeper.ErrBadRequest) {
		q.dropped.Add(1)
		q.setAside(name, fmt.Errorf("the bus refuses it as it stands: %w", err))
		q.pop(head)
		return true, nil
	}
	if err != nil {
		q.mu.Lock()
		q.failures++
		q.stalled = true
		q.notify()
		q.mu.Unlock()
		return true, err
	}
	if err := os.Remove(filepath.Join(q.dir, name)); err != nil {
		// Delivered: a start that finds it again delivers it again, and
		// the duplicate window stores it once.
		q.log.Error("a delivered act's queue file could not be removed", "file", filepath.Join(q.dir, name), "id", a.ID, "err", err)
	} else {
		_ = syncDir(q.dir)
	}
	q.log.Debug("queued act delivered", "id", a.ID, "verb", a.Verb)
	q.pop(head)
	return true, nil
}

// pop takes head, the queue's first entry, off the queue.
func (q *Queue) pop(head entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.entries = q.entries[1:]
	q.bytes -= head.size
	q.doneSeq = head.seq
	q.stalled = false
	q.notify()
}

// notify wakes the waiters; q.mu is held.
func (q *Queue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}
