package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The kept data and the small KV of a run. Module "bench", kept data "data":
// the KV bucket bench_data (stream KV_bench_data) and the stream bench_data,
// with the durable consumer bench_reader part-way through the stream.
const (
	module      = "bench"
	local       = "data"
	dataStream  = "bench_data"
	kvStream    = "KV_bench_data"
	consumer    = "bench_reader"
	smallModule = "small"
	smallLocal  = "kv"
	smallStream = "KV_small_kv"
	kvValueSize = 256
)

// filled is what the fill made.
type filled struct {
	Messages  int64 // in the data stream
	Bytes     uint64
	Subjects  int
	KVKeys    int
	AckFloor  uint64 // of the durable consumer
	KVBytes   uint64
	Small     int
	SmallSize uint64
	Took      time.Duration
}

// fill makes the kept data and the small KV bucket on the bus.
func fill(ctx context.Context, nc *nats.Conn, cfg Config) (*filled, error) {
	start := time.Now()
	var failed atomic.Int64
	var firstErr atomic.Value
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			if failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: dataStream, Subjects: []string{"bench.data.>"},
		Storage: jetstream.FileStorage, Replicas: cfg.replicas()}); err != nil {
		return nil, fmt.Errorf("create stream %s: %w", dataStream, err)
	}
	f := &filled{Messages: cfg.Size / int64(cfg.MsgSize), Subjects: cfg.Subjects, KVKeys: cfg.KVKeys, Small: cfg.SmallKVKeys}
	rng := rand.New(rand.NewChaCha8([32]byte{'k', 'e', 'e', 'p', 'e', 'r'}))
	for i := range f.Messages {
		// Varied subjects: bench.data.<group>.<item>, cfg.Subjects of them.
		idx := i % int64(cfg.Subjects)
		payload := make([]byte, cfg.MsgSize) // a fresh buffer: the publisher may keep it for a retry
		randomBytes(rng, payload)
		if _, err := js.PublishAsync(fmt.Sprintf("bench.data.g%d.i%d", idx/1000, idx%1000), payload, jetstream.WithStallWait(stallWait)); err != nil {
			return nil, fmt.Errorf("publish message %d of %d: %w", i+1, f.Messages, err)
		}
		if i%100_000 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			cfg.Log.Info("filling", "messages", i, "of", f.Messages)
		}
	}
	if err := waitPublished(ctx, js); err != nil {
		return nil, err
	}
	if err := makeKV(ctx, js, module+"_"+local, cfg.KVKeys, cfg.replicas(), rng); err != nil {
		return nil, err
	}
	if err := makeKV(ctx, js, smallModule+"_"+smallLocal, cfg.SmallKVKeys, cfg.replicas(), rng); err != nil {
		return nil, err
	}
	if n := failed.Load(); n > 0 {
		return nil, fmt.Errorf("%d publish(es) failed while filling, the first with: %v", n, firstErr.Load())
	}
	if f.AckFloor, err = partWay(ctx, js, dataStream, consumer, uint64(f.Messages)); err != nil {
		return nil, err
	}
	for name, dst := range map[string]*uint64{dataStream: &f.Bytes, kvStream: &f.KVBytes, smallStream: &f.SmallSize} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("look up stream %s after the fill: %w", name, err)
		}
		*dst = s.CachedInfo().State.Bytes
	}
	f.Took = time.Since(start)
	return f, nil
}

// stallWait is how long a publish waits for room among the pending ones (the
// default 200 ms fails a fill on a machine busy with other work).
const stallWait = time.Minute

// randomBytes fills p from rng, 8 bytes at a time.
func randomBytes(rng *rand.Rand, p []byte) {
	for i := 0; i < len(p); i += 8 {
		v := rng.Uint64()
		for j := i; j < min(i+8, len(p)); j++ {
			p[j] = byte(v)
			v >>= 8
		}
	}
}

func waitPublished(ctx context.Context, js jetstream.JetStream) error {
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("%d publish(es) were not acknowledged within 10 minutes", js.PublishAsyncPending())
	}
}

// makeKV makes the KV bucket with keys keys, each holding a random value.
func makeKV(ctx context.Context, js jetstream.JetStream, bucket string, keys, replicas int, rng *rand.Rand) error {
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1,
		Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		return fmt.Errorf("create KV bucket %s: %w", bucket, err)
	}
	for i := range keys {
		v := make([]byte, kvValueSize)
		randomBytes(rng, v)
		if _, err := js.PublishAsync(fmt.Sprintf("$KV.%s.key-%07d", bucket, i), v, jetstream.WithStallWait(stallWait)); err != nil {
			return fmt.Errorf("put key %d of bucket %s: %w", i, bucket, err)
		}
	}
	return waitPublished(ctx, js)
}

// partWay makes the durable consumer (bench_reader) on the stream (the data
// stream) and acknowledges it to about the middle of the stream, with a few
// messages delivered and not acknowledged. It returns the ack floor.
func partWay(ctx context.Context, js jetstream.JetStream, stream, consumer string, msgs uint64) (uint64, error) {
	startSeq := max(msgs/2, 1)
	c, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: consumer,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: startSeq,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		return 0, fmt.Errorf("create consumer %s: %w", consumer, err)
	}
	batch, err := fetchWhenLed(ctx, c, int(min(msgs-startSeq+1, 110)))
	if err != nil {
		return 0, fmt.Errorf("fetch from consumer %s: %w", consumer, err)
	}
	n := 0
	for m := range batch.Messages() {
		if n++; n <= 100 {
			if err := m.DoubleAck(ctx); err != nil {
				return 0, fmt.Errorf("acknowledge message %d of consumer %s: %w", n, consumer, err)
			}
		}
	}
	if err := batch.Error(); err != nil {
		return 0, fmt.Errorf("fetch from consumer %s: %w", consumer, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("consumer %s info: %w", consumer, err)
	}
	return info.AckFloor.Stream, nil
}

// fetchWhenLed fetches a batch once the consumer has a leader. On a cluster
// a new R3 consumer answers pull requests only after its group elects one:
// until then a fetch gets "no responders" and delivers nothing, so it is
// tried again, at most 50 times 100 ms apart.
func fetchWhenLed(ctx context.Context, c jetstream.Consumer, n int) (jetstream.MessageBatch, error) {
	for try := 1; ; try++ {
		info, err := c.Info(ctx)
		led := err == nil && (info.Cluster == nil || info.Cluster.Leader != "")
		if led {
			batch, err := c.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
			if err == nil {
				// A pull request with no responders ends the batch at once,
				// before any message, so the batch can be read to learn it.
				msgs := make([]jetstream.Msg, 0, n)
				for m := range batch.Messages() {
					msgs = append(msgs, m)
				}
				if berr := batch.Error(); len(msgs) > 0 || !errors.Is(berr, nats.ErrNoResponders) {
					return replayed{msgs: msgs, err: berr}, nil
				}
				err = batch.Error()
			}
			if !errors.Is(err, nats.ErrNoResponders) {
				return nil, err
			}
		}
		if try == 50 {
			if err == nil {
				err = errors.New("the consumer has no leader")
			}
			return nil, fmt.Errorf("after %d tries: %w", try, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// replayed is a batch already read whole.
type replayed struct {
	msgs []jetstream.Msg
	err  error
}

func (b replayed) Messages() <-chan jetstream.Msg {
	ch := make(chan jetstream.Msg, len(b.msgs))
	for _, m := range b.msgs {
		ch <- m
	}
	close(ch)
	return ch
}

func (b replayed) Error() error { return b.err }
