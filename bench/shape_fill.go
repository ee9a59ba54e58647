package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// shapeJS is a JetStream context for filling a shape's data, whose failed
// asynchronous publishes are counted.
type shapeJS struct {
	jetstream.JetStream
	failed   atomic.Int64
	firstErr atomic.Value
}

func (r *run) shapeJS() (*shapeJS, error) {
	s := &shapeJS{}
	js, err := jetstream.New(r.nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			if s.failed.Add(1) == 1 {
				s.firstErr.Store(err)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	s.JetStream = js
	return s, nil
}

// done waits for every publish and says whether any failed.
func (s *shapeJS) done(ctx context.Context) error {
	if err := waitPublished(ctx, s); err != nil {
		return err
	}
	if n := s.failed.Load(); n > 0 {
		return fmt.Errorf("%d publish(es) failed while filling, the first with: %v", n, s.firstErr.Load())
	}
	return nil
}

// payloadFunc fills the payload of message i.
type payloadFunc func(i int64, p []byte)

// randomPayload is incompressible bytes from a fixed seed.
func randomPayload() payloadFunc {
	rng := rand.New(rand.NewChaCha8([32]byte{'s', 'h', 'a', 'p', 'e'}))
	return func(_ int64, p []byte) { randomBytes(rng, p) }
}

// compressiblePayload is a JSON-like reading that differs from the last in a
// few digits, padded with repeated text: what a module's event stream of
// small records looks like to a compressor.
func compressiblePayload(i int64, p []byte) {
	head := fmt.Appendf(nil, `{"seq":%d,"sensor":"sensor-%03d","unit":"celsius","reading":21.%d,"status":"nominal","note":"`, i, i%500, i%10)
	n := copy(p, head)
	pad := []byte("all readings within limits; ")
	for n < len(p) {
		n += copy(p[n:], pad)
	}
	if len(p) > 2 {
		copy(p[len(p)-2:], `"}`)
	}
}

// fillStream makes the stream name on subjects prefix.> (its configuration
// changed by each of with) and publishes total bytes in messages of size
// bytes, on up to subjects subjects.
func (r *run) fillStream(ctx context.Context, js *shapeJS, name, prefix string, total int64, size, subjects int, payload payloadFunc, with ...func(*jetstream.StreamConfig)) (int64, error) {
	cfg := jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Storage: jetstream.FileStorage}
	for _, f := range with {
		f(&cfg)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		return 0, fmt.Errorf("create stream %s: %w", name, err)
	}
	msgs := max(total/int64(size), 1)
	for i := range msgs {
		p := make([]byte, size) // a fresh buffer: the publisher may keep it for a retry
		payload(i, p)
		idx := i % int64(max(subjects, 1))
		if _, err := js.PublishAsync(fmt.Sprintf("%s.g%d.i%d", prefix, idx/1000, idx%1000), p, jetstream.WithStallWait(stallWait)); err != nil {
			return 0, fmt.Errorf("publish message %d of %d to %s: %w", i+1, msgs, name, err)
		}
		if i%100_000 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			r.cfg.Log.Info("filling", "stream", name, "messages", i, "of", msgs)
		}
	}
	return msgs, js.done(ctx)
}

// fillKV makes the KV bucket with keys keys of size bytes each.
func (r *run) fillKV(ctx context.Context, js *shapeJS, bucket string, keys, size int, payload payloadFunc) error {
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1, Storage: jetstream.FileStorage}); err != nil {
		return fmt.Errorf("create KV bucket %s: %w", bucket, err)
	}
	for i := range keys {
		v := make([]byte, size)
		payload(int64(i), v)
		if _, err := js.PublishAsync(fmt.Sprintf("$KV.%s.key-%07d", bucket, i), v, jetstream.WithStallWait(stallWait)); err != nil {
			return fmt.Errorf("put key %d of bucket %s: %w", i, bucket, err)
		}
	}
	return js.done(ctx)
}

// fillObjects makes the object store bucket with objects of size bytes
// until total bytes are in it (at least one object).
func (r *run) fillObjects(ctx context.Context, js *shapeJS, bucket string, total int64, size int, payload payloadFunc) (int, error) {
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Storage: jetstream.FileStorage})
	if err != nil {
		return 0, fmt.Errorf("create object store %s: %w", bucket, err)
	}
	n := int(max(total/int64(size), 1))
	p := make([]byte, size)
	for i := range n {
		payload(int64(i), p)
		if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: fmt.Sprintf("object-%05d", i)}, bytes.NewReader(p)); err != nil {
			return 0, fmt.Errorf("put object %d of %d into %s: %w", i+1, n, bucket, err)
		}
	}
	return n, nil
}
