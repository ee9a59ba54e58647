package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// maxCheckedKeys bounds the keys keyDigests reads.
const maxCheckedKeys = 1_000_000

// keyDigests reads the value of every key of a KV bucket (the last message
// of each subject, deletes and purges left out) and returns its SHA-256 by
// key, through an ordered consumer.
func (r *run) keyDigests(ctx context.Context, bucket string) (map[string][32]byte, error) {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return nil, err
	}
	stream := "KV_" + bucket
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s is not there: %w", stream, err)
	}
	out := map[string][32]byte{}
	if s.CachedInfo().State.Msgs == 0 {
		return out, nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
	if err != nil {
		return nil, err
	}
	it, err := c.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	prefix := "$KV." + bucket + "."
	for range maxCheckedKeys {
		m, err := it.Next(jetstream.NextMaxWait(30 * time.Second))
		if err != nil {
			return nil, fmt.Errorf("read the keys of %s after %d: %w", bucket, len(out), err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		key := strings.TrimPrefix(m.Subject(), prefix)
		switch m.Headers().Get("KV-Operation") {
		case "DEL", "PURGE":
			delete(out, key)
		default:
			out[key] = sha256.Sum256(m.Data())
		}
		if meta.NumPending == 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("bucket %s holds more than %d keys, more than the check reads", bucket, maxCheckedKeys)
}

// checkKeys says whether every key of the bucket holds the value it held at
// the point (want), and no other key is there, after a rollback by who.
func (r *run) checkKeys(ctx context.Context, who, bucket string, want map[string][32]byte) error {
	got, err := r.keyDigests(ctx, bucket)
	if err != nil {
		return fmt.Errorf("after %s: %w", who, err)
	}
	var differ, gone, extra []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			gone = append(gone, k)
		case g != w:
			differ = append(differ, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(differ)+len(gone)+len(extra) == 0 {
		return nil
	}
	return fmt.Errorf("after %s, bucket %s is not as at the point: %d keys differ (%s), %d are gone (%s), %d are new (%s)",
		who, bucket, len(differ), firstKeys(differ), len(gone), firstKeys(gone), len(extra), firstKeys(extra))
}

// firstKeys names up to five of keys, sorted.
func firstKeys(keys []string) string {
	slices.Sort(keys)
	if len(keys) > 5 {
		return strings.Join(keys[:5], ", ") + ", …"
	}
	return strings.Join(keys, ", ")
}
