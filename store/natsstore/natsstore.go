// Package natsstore keeps store objects in a JetStream object store
// (nats://host:port/<bucket>), on the keeper's own bus or another one.
//
// The object store puts a whole object as one stream of chunks that it
// publishes asynchronously, with no ranged reads, and fails on R3 buckets
// for objects of a few hundred MB. So this backend stores every object in
// parts: each store.PartSize part is its own object-store object under a
// hidden name (/parts/<upload>/<n>, which no key can be), and Commit writes
// the object's head under its key last: a small JSON list of the parts and
// their SHA-256s, marked with the Nats-Keeper-Head header and carrying the
// object's size and sum in its metadata. Copy writes a second head naming the
// same parts; a head's parts are removed with the last head that names them. Parts go one at a time, in
// chunks of 512 KiB (less on a server with a smaller max payload), a whole
// part of them unacknowledged at most, and a read fetches only the parts it
// needs.
//
// The bucket's stream is made (or changed) with direct gets off, so every
// Stat, Open and part read is answered by the stream leader and sees every
// commit that returned; a follower answering a direct get may lag behind.
//
// It may import package store, internal/jsretry and nats.go, nothing else of
// this module.
package natsstore

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

// Options tune a Store.
type Options struct {
	// Replicas of the bucket; 0 is 3 when the server is in a cluster that
	// can place 3, else 1. A missing bucket is made with them; an existing
	// one with fewer is raised, one with more is left as it is.
	Replicas int
	// Logger receives what the store does on its own (retries, clean-ups);
	// nil discards it.
	Logger *slog.Logger
	// Timeout bounds each request to the bus and each chunk's
	// acknowledgement (a part whose put loses one is put again); a part's
	// whole put or get may take 8 times it. 0 is 15 s.
	Timeout time.Duration
	// URL is how the store is named in Describe; credentials in it are
	// dropped. Empty: the connected server's URL and the bucket.
	URL string
}

// Store is a store.Store on one object-store bucket.
type Store struct {
	js       jetstream.JetStream
	pub      jetstream.JetStream // publishes chunks: window bytes in flight, each acknowledged within timeout
	chunk    int                 // bytes of a chunk (chunkFor the server's max payload)
	obs      jetstream.ObjectStore
	stream   jetstream.Stream
	bucket   string
	url      string
	replicas int
	timeout  time.Duration
	log      *slog.Logger
	closed   atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Describe says what the store is and what it guarantees.
func (s *Store) Describe() store.Description {
	return store.Description{
		URL:  s.url,
		Kind: "nats",
		Publish: fmt.Sprintf("Each 8 MiB part is its own object in the object-store bucket %s (R%d) under a hidden name; "+
			"Commit writes the object's head (its parts and their SHA-256s) under the key last, and the head's meta message, "+
			"one rollup message, is the commit: the object is visible whole or not at all. Committing over a key replaces "+
			"that message, so a reader sees the old head or the new one, and then removes the old parts unless another head "+
			"names them (Copy writes a head that shares its source's parts): an object opened before a replace or a delete "+
			"fails, naming the missing part, once they are gone.", s.bucket, s.replicas),
		Ranges: "ReadAt and Reader fetch only the parts that cover the range, each through an ordered pull consumer of its " +
			"own that holds at most 2 MiB of its chunks ahead (a Reader opens the next part while one is read); the object " +
			"store has no ranged reads, so a part streams from its start and up to 8 MiB is read to reach an offset. " +
			"A part read to its end is checked against the SHA-256 its head records before its last bytes are handed out; " +
			"a range that ends inside a part leaves that part unchecked. ReadAt keeps the last part it read (one part in memory at most, until a Reader " +
			"is begun), so nearby small reads cost one get.",
		Listing: "List reads the last meta message of every object in the bucket's stream through an ordered consumer " +
			"made when List begins, on the stream leader, so it sees every Commit and Delete that returned before it " +
			"(each acknowledged by the stream's quorum); part objects are left out. Direct gets are off on the bucket, " +
			"so Stat and Open are answered by the leader too.",
	}
}

// Close stops the store's publisher; the connection is the caller's to
// close.
func (s *Store) Close() error {
	if !s.closed.Swap(true) {
		s.pub.CleanupPublisher()
	}
	return nil
}

func (s *Store) check(key string) error {
	if s.closed.Load() {
		return fmt.Errorf("the store on bucket %s is closed, so nothing was done with %q", s.bucket, key)
	}
	return store.CheckKey(key)
}

// describeURL names the store without credentials.
func describeURL(js jetstream.JetStream, given, bucket string) string {
	raw := given
	if raw == "" {
		raw = js.Conn().ConnectedUrlRedacted() + "/" + bucket
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			raw = raw[:strings.Index(raw, "//")+2] + raw[i+1:]
		}
		return raw
	}
	u.User = nil
	return u.String()
}

// cleanupCtx is a context for a clean-up that must run even when the
// caller's context is done (an Abort after a cancel), bounded by the
// store's step timeout per step.
func (s *Store) cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), tries*s.partTimeout())
}

// partTimeout bounds one part's put or get.
func (s *Store) partTimeout() time.Duration { return 8 * s.timeout }
