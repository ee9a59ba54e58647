package keeper

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// The positions a point or an aside records are read in two parts. Those
// of the module's consumers on streams the archive does not hold are read
// before any stream is snapshotted (a census that leaves the archive's
// streams out): one that moves meanwhile is recorded where it was, so a
// restore makes it hear the events since again instead of skipping any.
// Those on the archive's own streams are read from the streams' snapshots
// as they pass into the archive: each is exactly where the snapshot has
// it, which is where a restore brings it back, and the server lists no
// consumer the snapshot carries.

// positionsBefore is what is read before the snapshots: the streams on the
// bus and the consumers of every stream but the archive's (carried).
type positionsBefore struct {
	module, local string
	carried       []string
	read          []string // the carried streams whose snapshots' consumers are read
	streams       []StreamInfo
	others        []Position
	snapped       *snapConsumers
}

// readPositionsBefore takes the census of the bus but the carried streams,
// live as they were just looked up, of the consumers that may be module's
// (CensusQuery.Wants: by name, by metadata, or declared by local's plan). The consumers of a carried stream that
// had none then are not read from its snapshot (reading its start takes an
// s2 block's buffers, some 2 MiB): one made since is not recorded, as it was
// not when the census listed every stream before the snapshot; its
// snapshot carries it all the same.
func (k *Keeper) readPositionsBefore(ctx context.Context, module, local string, live []StreamInfo) (*positionsBefore, error) {
	carried, read := streamNames(live), []string{}
	for _, s := range live {
		if s.Consumers != 0 {
			read = append(read, s.Name)
		}
	}
	named, err := k.planConsumers(ctx, module, local)
	if err != nil {
		return nil, fmt.Errorf("reading the positions of %s's consumers: %w", module, err)
	}
	streams, others, err := k.census(ctx, CensusQuery{Skip: carried, Module: module, Named: named})
	if err != nil {
		return nil, fmt.Errorf("reading the positions of %s's consumers: %w", module, err)
	}
	others = slices.DeleteFunc(others, func(p Position) bool { return slices.Contains(carried, p.Stream) })
	return &positionsBefore{module: module, local: local, carried: carried, read: read, streams: streams, others: others,
		snapped: &snapConsumers{by: map[string][]busarchive.SnapshotConsumer{}}}, nil
}

// take is the bus's snapshot that also reads, as each carried stream's
// snapshot passes, its consumers.
func (b *positionsBefore) take(take streamSource) streamSource {
	return func(ctx context.Context, stream string, data, meta io.WriteCloser) error {
		if !slices.Contains(b.read, stream) {
			return take(ctx, stream, data, meta)
		}
		return b.snapped.read(ctx, stream, take, data, meta)
	}
}

// positions are the module's positions: those read before, and those of
// the carried streams' snapshots, sorted by stream and consumer, as far as
// the ownership rules (owners) give them to the module's kept data.
func (b *positionsBefore) positions(ctx context.Context, k *Keeper) ([]Position, error) {
	all := slices.Clone(b.others)
	for _, s := range b.carried {
		for _, c := range b.snapped.of(s) {
			all = append(all, Position{Stream: s, Consumer: c.Name, AckFloor: c.AckFloor, Config: c.Config})
		}
	}
	slices.SortFunc(all, func(x, y Position) int {
		return cmp.Or(strings.Compare(x.Stream, y.Stream), strings.Compare(x.Consumer, y.Consumer))
	})
	o, err := k.owners(ctx, b.streams, b.module, consumerNames(all))
	if err != nil {
		return nil, fmt.Errorf("reading the positions of %s's consumers: %w", b.module, err)
	}
	out := []Position{}
	for _, c := range all {
		if o.owns(b.module, b.local, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// snapConsumers are the durable consumers read from each stream's
// snapshot, by stream: the last snapshot taken of it (an archive written
// again after the bus went away takes its streams again).
type snapConsumers struct {
	mu sync.Mutex
	by map[string][]busarchive.SnapshotConsumer
}

func (s *snapConsumers) of(stream string) []busarchive.SnapshotConsumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[stream]
}

// read runs take with data teed, up to the end of the snapshot's consumer
// entries, into busarchive.ReadSnapshotConsumers, which reads them in a
// goroutine of its own as the snapshot goes on (a startQueue between
// them), and keeps what it found once take succeeded.
func (s *snapConsumers) read(ctx context.Context, stream string, take streamSource, data, meta io.WriteCloser) error {
	q := newStartQueue()
	type found struct {
		cs  []busarchive.SnapshotConsumer
		err error
	}
	done := make(chan found, 1)
	go func() {
		cs, err := busarchive.ReadSnapshotConsumers(q)
		q.stop() // what comes after is not queued
		done <- found{cs, err}
	}()
	err := take(ctx, stream, &startTee{WriteCloser: data, q: q}, meta)
	q.end()
	f := <-done
	if err != nil {
		return err
	}
	if f.err != nil {
		return fmt.Errorf("reading the consumers of stream %s from its snapshot: %w", stream, f.err)
	}
	s.mu.Lock()
	s.by[stream] = f.cs
	s.mu.Unlock()
	return nil
}

// startTee writes everything to its WriteCloser, and a copy to q until q's
// reader stopped.
type startTee struct {
	io.WriteCloser
	q *startQueue
}

func (t *startTee) Write(p []byte) (int, error) {
	t.q.put(p)
	return t.WriteCloser.Write(p)
}

// startQueueMax bounds the bytes a startQueue holds: the snapshot waits
// for its reader beyond that (a snapshot's consumer entries compress to
// far less).
const startQueueMax = 4 << 20

// startQueue passes copies of a snapshot's first writes to a reader in
// another goroutine, so that the snapshot does not wait on the reading.
type startQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	chunks  [][]byte
	n       int  // bytes queued
	ended   bool // no more writes: the reader reads to the end, then io.EOF
	stopped bool // the reader is done: writes are not queued
}

func newStartQueue() *startQueue {
	q := &startQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// put queues a copy of p, waiting while startQueueMax bytes are queued.
func (q *startQueue) put(p []byte) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.stopped && q.n > 0 && q.n+len(p) > startQueueMax {
		q.cond.Wait()
	}
	if q.stopped || len(p) == 0 {
		return
	}
	q.chunks = append(q.chunks, bytes.Clone(p))
	q.n += len(p)
	q.cond.Broadcast()
}

func (q *startQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.chunks) == 0 && !q.ended {
		q.cond.Wait()
	}
	if len(q.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, q.chunks[0])
	if q.chunks[0] = q.chunks[0][n:]; len(q.chunks[0]) == 0 {
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
	}
	q.n -= n
	q.cond.Broadcast()
	return n, nil
}

// end says no more is written.
func (q *startQueue) end() {
	q.mu.Lock()
	q.ended = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// stop says the reader is done: what is queued is dropped and nothing more
// is queued.
func (q *startQueue) stop() {
	q.mu.Lock()
	q.stopped, q.chunks, q.n = true, nil, 0
	q.cond.Broadcast()
	q.mu.Unlock()
}
