package bench

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/nats-io/nats.go/jetstream"

	keptwire "github.com/nats-keeper/nats-keeper/kept"
)

// The shapes of issue 40's rollbacks (methodPairs runs them), and the
// changes a migration makes to their data after the point.
const (
	// tailBytes is what a migration appends to a stream after its point
	// (at most an eighth of the stream, in small runs).
	tailBytes = 1 << 20
	// The logical shape's bucket: logicalKeys keys holding about cfg.Size
	// in all, logicalRewritten of them rewritten by the migration.
	logicalKeys      = 10_000
	logicalRewritten = 100
	maxLogicalValue  = 1_000_000 // one value under the server's default max payload
)

// shapeDelta: one stream of cfg.Size random bytes with a durable consumer;
// after its point a migration appends tailBytes; restore-kept method auto
// must pick delta, against the rollback by hand.
func (r *run) shapeDelta(ctx context.Context, sr *ShapeResult) error {
	const stream, prefix = "bench_dl", "bench.dl"
	msgs, floor, err := r.readStream(ctx, stream, prefix, randomPayload())
	if err != nil {
		return err
	}
	tail := r.tailSize()
	sr.Data = fmt.Sprintf("kept data `bench/dl` = stream `%s`, %d messages of %d random bytes, durable consumer `bench_dl_reader` at ack floor %d; one point taken first (not timed), "+
		"and a `nats backup stream` of it (not timed) for the rollback by hand; before every rollback of either side a migration appends %s in %d messages (not timed)",
		stream, msgs, r.cfg.MsgSize, floor, mib(float64(tail)), r.tailMsgs())
	pay := migrationPayload()
	return r.methodPairs(ctx, sr, methodRun{
		k:      kept{module: module, local: "dl", streams: []string{stream}},
		op:     fmt.Sprintf("`restore-kept` method auto (picks delta) after %s appended", mib(float64(tail))),
		method: keptwire.MethodAuto, picks: keptwire.MethodDelta, target: deltaTarget,
		change: func(ctx context.Context) error { return r.appendTail(ctx, stream, prefix, pay) },
		check:  r.checkBack,
	})
}

// shapeNonPrefix: one stream of cfg.Size random bytes with a durable
// consumer; after its point a migration deletes one message the point holds
// and appends tailBytes, so the point is no prefix of the live stream:
// restore-kept method auto must pick full, against method full (today's
// rollback) after the same change.
func (r *run) shapeNonPrefix(ctx context.Context, sr *ShapeResult) error {
	const stream, prefix = "bench_np", "bench.np"
	msgs, floor, err := r.readStream(ctx, stream, prefix, randomPayload())
	if err != nil {
		return err
	}
	gone := uint64(max(msgs/4, 1))
	tail := r.tailSize()
	sr.Data = fmt.Sprintf("kept data `bench/np` = stream `%s`, %d messages of %d random bytes, durable consumer `bench_np_reader` at ack floor %d; one point taken first (not timed); "+
		"before every rollback of either side a migration deletes message %d (of the point) and appends %s in %d messages (not timed); the target is \"no slower than today\", "+
		"with a tolerance of %.0f%%", stream, msgs, r.cfg.MsgSize, floor, gone, mib(float64(tail)), r.tailMsgs(), (nonPrefixTarget-1)*100)
	pay := migrationPayload()
	js, err := jetstream.New(r.nc)
	if err != nil {
		return err
	}
	change := func(ctx context.Context) error {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("stream %s is not there: %w", stream, err)
		}
		if err := s.DeleteMsg(ctx, gone); err != nil {
			return fmt.Errorf("delete message %d of %s: %w", gone, stream, err)
		}
		return r.appendTail(ctx, stream, prefix, pay)
	}
	return r.methodPairs(ctx, sr, methodRun{
		k:      kept{module: module, local: "np", streams: []string{stream}},
		op:     fmt.Sprintf("`restore-kept` method auto (picks full) after one message of the point deleted and %s appended", mib(float64(tail))),
		method: keptwire.MethodAuto, picks: keptwire.MethodFull, target: nonPrefixTarget, versus: keptwire.MethodFull,
		change: change, check: r.checkBack,
	})
}

// shapeLogical: one KV bucket of logicalKeys keys holding about cfg.Size in
// all; after its point a migration rewrites logicalRewritten keys;
// restore-kept method logical against the rollback by hand, every key
// checked equal to the point's after each.
func (r *run) shapeLogical(ctx context.Context, sr *ShapeResult) error {
	const bucket = "bench_lg"
	js, err := r.shapeJS()
	if err != nil {
		return err
	}
	value := int(min(max(r.cfg.Size/logicalKeys, 1), maxLogicalValue))
	if err := r.fillKV(ctx, js, bucket, logicalKeys, value, randomPayload()); err != nil {
		return err
	}
	keys, err := r.keyDigests(ctx, bucket)
	if err != nil {
		return err
	}
	sr.Data = fmt.Sprintf("kept data `bench/lg` = KV bucket `%s`, %d keys of %d random bytes (history 1), about the run's size in all: the issue's \"10,000 KV keys\" read as "+
		"a bucket of 10,000 keys as big as the stream of the other shapes, so that the rollback by hand, which copies the whole bucket, and the logical one, which writes only "+
		"the keys that differ, are compared on the same kept data size; one point taken first (not timed), and a `nats backup stream` of it (not timed) for the rollback by hand; "+
		"before every rollback of either side a migration rewrites %d keys (every %dth) with new random values (not timed)",
		bucket, logicalKeys, value, logicalRewritten, logicalKeys/logicalRewritten)
	if err := r.noteBytes(ctx, sr, "KV_"+bucket); err != nil {
		return err
	}
	pay := migrationPayload()
	return r.methodPairs(ctx, sr, methodRun{
		k:      kept{module: module, local: "lg", streams: []string{"KV_" + bucket}},
		op:     fmt.Sprintf("`restore-kept` method logical after %d of %d keys rewritten", logicalRewritten, logicalKeys),
		method: keptwire.MethodLogical, picks: keptwire.MethodLogical, target: logicalTarget,
		change: func(ctx context.Context) error { return r.rewriteKeys(ctx, js, bucket, value, pay) },
		check: func(ctx context.Context, who string, _ map[string]streamSum, _ bool) error {
			return r.checkKeys(ctx, who, bucket, keys)
		},
	})
}

// tailSize is the bytes a migration appends: tailBytes, at most an eighth
// of the stream (at least one message).
func (r *run) tailSize() int64 {
	return min(int64(tailBytes), max(r.cfg.Size/8, int64(r.cfg.MsgSize)))
}

// tailMsgs is the messages a migration appends.
func (r *run) tailMsgs() int64 { return max(r.tailSize()/int64(r.cfg.MsgSize), 1) }

// migrationPayload is incompressible bytes from a seed of its own, so that
// what a migration writes differs from what the data was filled with.
func migrationPayload() payloadFunc {
	rng := rand.New(rand.NewChaCha8([32]byte{'m', 'i', 'g', 'r', 'a', 't', 'e'}))
	return func(_ int64, p []byte) { randomBytes(rng, p) }
}

// appendTail publishes tailMsgs messages of cfg.MsgSize bytes to the
// stream, on the subjects its fill used.
func (r *run) appendTail(ctx context.Context, stream, prefix string, payload payloadFunc) error {
	js, err := r.shapeJS()
	if err != nil {
		return err
	}
	subjects := int64(max(r.cfg.Subjects, 1))
	for i := range r.tailMsgs() {
		p := make([]byte, r.cfg.MsgSize)
		payload(i, p)
		idx := i % subjects
		if _, err := js.PublishAsync(fmt.Sprintf("%s.g%d.i%d", prefix, idx/1000, idx%1000), p, jetstream.WithStallWait(stallWait)); err != nil {
			return fmt.Errorf("append message %d to %s: %w", i+1, stream, err)
		}
	}
	return js.done(ctx)
}

// rewriteKeys puts a new value of size bytes in logicalRewritten keys of
// the bucket, spread evenly over its keys.
func (r *run) rewriteKeys(ctx context.Context, js *shapeJS, bucket string, size int, payload payloadFunc) error {
	step := logicalKeys / logicalRewritten
	for i := range logicalRewritten {
		v := make([]byte, size)
		payload(int64(i), v)
		if _, err := js.PublishAsync(fmt.Sprintf("$KV.%s.key-%07d", bucket, i*step), v, jetstream.WithStallWait(stallWait)); err != nil {
			return fmt.Errorf("rewrite key %d of bucket %s: %w", i*step, bucket, err)
		}
	}
	return js.done(ctx)
}
