package bench

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamSum is what a shape checks after every restore: the stream's state,
// the durable consumers' positions, and (after the first restore by each
// tool) a digest of every message: sequence, subject, headers and data.
type streamSum struct {
	Msgs, Bytes, First, Last uint64
	Consumers                map[string]uint64 // durable name -> ack floor (stream sequence)
	Digest                   [32]byte
}

// sumStreams reads the sums of streams; with digest, it reads every message.
func (r *run) sumStreams(ctx context.Context, streams []string, digest bool) (map[string]streamSum, error) {
	return r.sumStreamsTo(ctx, streams, func(_ string, last uint64) uint64 {
		if digest {
			return last
		}
		return 0
	})
}

// sumStreamsTo reads the sums of streams, with a digest of every message
// up to digestTo(stream, its last sequence) (none when that is 0).
func (r *run) sumStreamsTo(ctx context.Context, streams []string, digestTo func(stream string, last uint64) uint64) (map[string]streamSum, error) {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return nil, err
	}
	out := map[string]streamSum{}
	for _, name := range streams {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s is not there: %w", name, err)
		}
		st := s.CachedInfo().State
		sum := streamSum{Msgs: st.Msgs, Bytes: st.Bytes, First: st.FirstSeq, Last: st.LastSeq, Consumers: map[string]uint64{}}
		lister := s.ListConsumers(ctx)
		for ci := range lister.Info() {
			if ci.Config.Durable != "" {
				sum.Consumers[ci.Config.Durable] = ci.AckFloor.Stream
			}
		}
		if err := lister.Err(); err != nil {
			return nil, fmt.Errorf("list the consumers of %s: %w", name, err)
		}
		if to := digestTo(name, st.LastSeq); to > 0 && st.Msgs > 0 {
			if sum.Digest, err = digestStream(ctx, s, to); err != nil {
				return nil, fmt.Errorf("read every message of %s: %w", name, err)
			}
		}
		out[name] = sum
	}
	return out, nil
}

// digestStream hashes every message of s up to last through an ordered
// consumer.
func digestStream(ctx context.Context, s jetstream.Stream, last uint64) ([32]byte, error) {
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return [32]byte{}, err
	}
	it, err := c.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return [32]byte{}, err
	}
	defer it.Stop()
	h := sha256.New()
	for {
		m, err := it.Next(jetstream.NextMaxWait(30 * time.Second))
		if err != nil {
			return [32]byte{}, fmt.Errorf("the message after the last read, up to sequence %d: %w", last, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return [32]byte{}, err
		}
		hashMsg(h, meta.Sequence.Stream, m.Subject(), m.Headers(), m.Data())
		if meta.Sequence.Stream >= last {
			var out [32]byte
			copy(out[:], h.Sum(nil))
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return [32]byte{}, err
		}
	}
}

func hashMsg(h hash.Hash, seq uint64, subject string, hdr nats.Header, data []byte) {
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	binary.BigEndian.PutUint64(n[:], seq)
	h.Write(n[:])
	put([]byte(subject))
	keys := make([]string, 0, len(hdr))
	for k := range hdr {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range hdr[k] {
			put([]byte(k))
			put([]byte(v))
		}
	}
	put(data)
}

// checkSums compares what is on the bus now with want, after a restore by
// who: every stream's state and consumers, and the digest where both have
// one.
func (r *run) checkSums(ctx context.Context, who string, want map[string]streamSum, digest bool) error {
	return r.compareSums(ctx, who, want, digest, false)
}

// checkBack is checkSums after a rollback of live data, which may leave
// each stream's last sequence past the point's but never below it (a delta
// leaves the removed tail as a gap; a full restore over live data bumps it
// past the live one): the digest is of the messages up to the point's last
// sequence.
func (r *run) checkBack(ctx context.Context, who string, want map[string]streamSum, digest bool) error {
	return r.compareSums(ctx, who, want, digest, true)
}

// compareSums is checkSums, with the last sequence allowed above want's
// when raised.
func (r *run) compareSums(ctx context.Context, who string, want map[string]streamSum, digest, raised bool) error {
	streams := make([]string, 0, len(want))
	for s := range want {
		streams = append(streams, s)
	}
	slices.Sort(streams)
	got, err := r.sumStreamsTo(ctx, streams, func(s string, last uint64) uint64 {
		if !digest {
			return 0
		}
		return min(last, want[s].Last)
	})
	if err != nil {
		return fmt.Errorf("after %s: %w", who, err)
	}
	for _, s := range streams {
		w, g := want[s], got[s]
		lastOK := w.Last == g.Last || (raised && g.Last > w.Last)
		switch {
		case w.Msgs != g.Msgs || w.Bytes != g.Bytes || w.First != g.First || !lastOK:
			return fmt.Errorf("after %s, stream %s holds %d messages, %d bytes, sequences %d–%d; before it held %d, %d, %d–%d",
				who, s, g.Msgs, g.Bytes, g.First, g.Last, w.Msgs, w.Bytes, w.First, w.Last)
		case len(w.Consumers) != len(g.Consumers):
			return fmt.Errorf("after %s, stream %s has %d durable consumers, not %d", who, s, len(g.Consumers), len(w.Consumers))
		case digest && w.Digest != g.Digest:
			return fmt.Errorf("after %s, the messages of stream %s differ from those before (sha256 of every message)", who, s)
		}
		for name, floor := range w.Consumers {
			if gf, ok := g.Consumers[name]; !ok || gf != floor {
				return fmt.Errorf("after %s, consumer %s of %s stands at %d (there: %v), not %d", who, name, s, gf, ok, floor)
			}
		}
	}
	return nil
}

// waitRemoved waits until the server no longer knows a deleted stream and
// has removed its files (waitFiles).
func (r *run) waitRemoved(ctx context.Context, stream string) error {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return err
	}
	return r.waitFor(ctx, "deleted stream "+stream+" to be gone", func() bool {
		_, err := js.Stream(ctx, stream)
		return errors.Is(err, jetstream.ErrStreamNotFound) && r.filesGone(stream)
	})
}

// waitFiles waits until the server has removed the files of a stream it
// deleted. nats-server deletes a stream by renaming its directory to
// .<name> and removing that in the background; a second delete of the same
// name before that removal ends cannot rename (the target is not empty),
// leaves the message blocks in place, and the next restore of the stream
// then fails with "expected sequence does not match store" (10062). A
// stream with many consumers takes the longest.
func (r *run) waitFiles(ctx context.Context, stream string) error {
	return r.waitFor(ctx, "files of the deleted stream "+stream+" to be removed", func() bool { return r.filesGone(stream) })
}

// filesGone reports whether no .<stream> directory of a deleted stream is
// left in the server's store.
func (r *run) filesGone(stream string) bool {
	for _, pattern := range []string{
		filepath.Join(r.work, "store", "jetstream", "*", "streams", "."+stream),
		filepath.Join(r.work, "store", "*", "jetstream", "*", "streams", "."+stream),
	} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return false
		}
	}
	return true
}

// waitFor polls done for up to 2 minutes.
func (r *run) waitFor(ctx context.Context, what string, done func() bool) error {
	for deadline := time.Now().Add(2 * time.Minute); !done(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("waited 2 minutes for the %s, in vain", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
