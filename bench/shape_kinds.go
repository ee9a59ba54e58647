package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The shapes other than random and points: what each fills, and which
// comparisons it runs (shape_pairs.go). Every kept data is of module bench,
// and each shape runs on a server of its own.

// objectSize is the size of one object of the module shape's object store.
const objectSize = 16 << 20

// shapeCompressible: one stream of cfg.Size bytes of compressible messages
// with a durable consumer part-way; snapshot and restore against the CLI and
// the server's own restore.
func (r *run) shapeCompressible(ctx context.Context, sr *ShapeResult) error {
	const stream = "bench_zip"
	msgs, floor, err := r.readStream(ctx, stream, "bench.zip", compressiblePayload)
	if err != nil {
		return err
	}
	sr.Data = fmt.Sprintf("kept data `bench/zip` = stream `%s`, %d messages of %d bytes of JSON-like text (a few digits change from one to the next), durable consumer `bench_zip_reader` at ack floor %d",
		stream, msgs, r.cfg.MsgSize, floor)
	return r.keptPairs(ctx, sr, kept{module: module, local: "zip", streams: []string{stream}})
}

// shapeModule: a KV bucket, an object store and a stream, a quarter, a
// quarter and a half of cfg.Size, of random bytes, with a durable consumer
// on the stream; snapshot and restore of the kept data against the CLI's
// three commands one after the other.
func (r *run) shapeModule(ctx context.Context, sr *ShapeResult) error {
	data, err := r.fillModule(ctx, "mod")
	if err != nil {
		return err
	}
	sr.Data = data
	if err := r.noteBytes(ctx, sr, "KV_bench_mod", "OBJ_bench_mod", "bench_mod"); err != nil {
		return err
	}
	// Issue 18: the module's kept data snapshots and restores in at most
	// 0.6× the CLI's three commands one after the other.
	return r.keptPairs(ctx, sr, kept{module: module, local: "mod", streams: []string{"KV_bench_mod", "OBJ_bench_mod", "bench_mod"}, target: 0.6})
}

// fillModule fills the kept data bench/<local> as a module keeps it, with
// cfg.Size random bytes: KV bucket, object store and stream bench_<local>,
// a quarter, a quarter and a half of the bytes, the stream's durable
// consumer part-way; it says what it made.
func (r *run) fillModule(ctx context.Context, local string) (string, error) {
	js, err := r.shapeJS()
	if err != nil {
		return "", err
	}
	name := "bench_" + local
	pay := randomPayload()
	quarter := r.cfg.Size / 4
	keys := int(max(quarter/int64(r.cfg.MsgSize), 1))
	if err := r.fillKV(ctx, js, name, keys, r.cfg.MsgSize, pay); err != nil {
		return "", err
	}
	osize := int(min(int64(objectSize), max(quarter, 1)))
	objects, err := r.fillObjects(ctx, js, name, quarter, osize, pay)
	if err != nil {
		return "", err
	}
	msgs, err := r.fillStream(ctx, js, name, "bench."+local, 2*quarter, r.cfg.MsgSize, r.cfg.Subjects, pay)
	if err != nil {
		return "", err
	}
	floor, err := partWay(ctx, js, name, name+"_reader", uint64(msgs))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("kept data `bench/%s` = KV bucket `%s` (%d keys of %d random bytes) + object store `%s` (%d objects of %s) + stream `%s` (%d messages of %d random bytes, durable consumer `%s_reader` at ack floor %d)",
		local, name, keys, r.cfg.MsgSize, name, objects, mib(float64(osize)), name, msgs, r.cfg.MsgSize, name, floor), nil
}

// shapeRollback: one stream of cfg.Size random bytes with a durable
// consumer, rolled back to its point with the data live.
func (r *run) shapeRollback(ctx context.Context, sr *ShapeResult) error {
	const stream = "bench_rb"
	msgs, floor, err := r.readStream(ctx, stream, "bench.rb", randomPayload())
	if err != nil {
		return err
	}
	sr.Data = fmt.Sprintf("kept data `bench/rb` = stream `%s`, %d messages of %d random bytes, durable consumer `bench_rb_reader` at ack floor %d; one point taken first (not timed), and a `nats backup stream` of it (not timed) for the rollback by hand",
		stream, msgs, r.cfg.MsgSize, floor)
	return r.rollbackPairs(ctx, sr, kept{module: module, local: "rb", streams: []string{stream}})
}

// shapeBigKV: one KV bucket of cfg.BigKVKeys keys.
func (r *run) shapeBigKV(ctx context.Context, sr *ShapeResult) error {
	js, err := r.shapeJS()
	if err != nil {
		return err
	}
	if err := r.fillKV(ctx, js, "bench_big", r.cfg.BigKVKeys, kvValueSize, randomPayload()); err != nil {
		return err
	}
	sr.Data = fmt.Sprintf("kept data `bench/big` = KV bucket `bench_big`, %d keys of %d random bytes", r.cfg.BigKVKeys, kvValueSize)
	if err := r.noteBytes(ctx, sr, "KV_bench_big"); err != nil {
		return err
	}
	return r.keptPairs(ctx, sr, kept{module: module, local: "big", streams: []string{"KV_bench_big"}})
}

// consumerMsgs is the messages of the consumers shape's stream.
const consumerMsgs = 10_000

// shapeConsumers: one stream of small messages with cfg.Consumers durable
// consumers of the module, each at its own position (started at its own
// sequence, one message acknowledged); snapshot-kept reads their positions,
// a restore sets them back, into absent data and with the data live.
func (r *run) shapeConsumers(ctx context.Context, sr *ShapeResult) error {
	js, err := r.shapeJS()
	if err != nil {
		return err
	}
	const stream = "bench_many"
	// nats-server 2.15 allows 1,000 consumers on a stream unless its
	// configuration says more; the checks' ordered consumer is one more.
	maxc := r.cfg.Consumers + 10
	msgs, err := r.fillStream(ctx, js, stream, "bench.many", consumerMsgs*128, 128, 100, randomPayload(),
		func(c *jetstream.StreamConfig) { c.MaxConsumers = maxc })
	if err != nil {
		return err
	}
	start := time.Now()
	for i := range r.cfg.Consumers {
		name := fmt.Sprintf("bench_c%05d", i)
		c, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: name,
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: uint64(i)%uint64(msgs) + 1,
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
		if err != nil {
			return fmt.Errorf("create consumer %d of %d: %w", i+1, r.cfg.Consumers, err)
		}
		batch, err := c.FetchNoWait(1)
		if err != nil {
			return fmt.Errorf("fetch from consumer %s: %w", name, err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				return fmt.Errorf("acknowledge a message of consumer %s: %w", name, err)
			}
		}
		if i%500 == 0 {
			r.cfg.Log.Info("making consumers", "made", i, "of", r.cfg.Consumers)
		}
	}
	sr.Data = fmt.Sprintf("kept data `bench/many` = stream `%s`, %d messages of 128 random bytes, with %d durable consumers `bench_c00000`… of the module, each started at its own sequence with one message acknowledged (made in %s); the stream's max_consumers is %d (nats-server 2.15 allows 1,000 by default)",
		stream, msgs, r.cfg.Consumers, time.Since(start).Round(time.Second), maxc)
	// A reply that cannot be sent is waited for 2 minutes, not the default
	// half hour (its small stream takes seconds): the shape then fails with
	// what was measured so far.
	k := kept{module: module, local: "many", streams: []string{stream}, wait: 2 * time.Minute}
	if err := r.keptPairs(ctx, sr, k); err != nil {
		return err
	}
	// With the consumers live: every one set aside with the stream, then
	// set back by the restore.
	return r.rollbackPairs(ctx, sr, k)
}

// readStream fills the stream of cfg.Size bytes on subjects prefix.> and
// makes its durable consumer <stream>_reader part-way; it returns the
// messages and the consumer's ack floor.
func (r *run) readStream(ctx context.Context, stream, prefix string, payload payloadFunc) (int64, uint64, error) {
	js, err := r.shapeJS()
	if err != nil {
		return 0, 0, err
	}
	msgs, err := r.fillStream(ctx, js, stream, prefix, r.cfg.Size, r.cfg.MsgSize, r.cfg.Subjects, payload)
	if err != nil {
		return 0, 0, err
	}
	floor, err := partWay(ctx, js, stream, stream+"_reader", uint64(msgs))
	return msgs, floor, err
}

// noteBytes adds the stored bytes of each stream to the shape's notes.
func (r *run) noteBytes(ctx context.Context, sr *ShapeResult, streams ...string) error {
	sums, err := r.sumStreams(ctx, streams, false)
	if err != nil {
		return err
	}
	line := "stored:"
	for i, s := range streams {
		if i > 0 {
			line += ","
		}
		line += fmt.Sprintf(" `%s` %s (%d messages)", s, mib(float64(sums[s].Bytes)), sums[s].Msgs)
	}
	sr.Notes = append(sr.Notes, line)
	return nil
}
