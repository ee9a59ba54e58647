package keeper

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"io"
	"strings"
)

// ErrNoStream is returned (wrapped) by Bus methods when the named stream does
// not exist.
var ErrNoStream = errors.New("no such stream")

// StreamInfo is what the keeper needs to know of one live stream.
type StreamInfo struct {
	Name      string   `json:"name"`               // the stream
	Subjects  []string `json:"subjects,omitempty"` // the subjects it takes (the overlap check reads them)
	Messages  uint64   `json:"messages"`           // messages it holds
	Bytes     uint64   `json:"bytes"`              // bytes it holds
	FirstSeq  uint64   `json:"first-seq"`          // its first sequence
	LastSeq   uint64   `json:"last-seq"`           // its last sequence
	Consumers int      `json:"consumers"`          // how many consumers it has (Streams: -1 when not known: its leader did not answer the list)
	// NumSubjects is how many subjects hold a message (a KV bucket's keys,
	// counting those whose last entry is a delete or purge marker).
	NumSubjects uint64 `json:"num-subjects,omitempty"`
	// Made is when the stream was made, in Unix nanoseconds (0: not
	// known); capture reads it to see that a stream was made again.
	Made int64 `json:"-"`
}

// Bus is the keeper's view of a JetStream system. Implementations must be safe
// for concurrent use and must not assume a single server: on a cluster the
// snapshot is answered by the stream's leader, and a restore keeps the
// replicas and placement that the archived configuration names.
type Bus interface {
	MessageBus

	// ServerVersion is the version of the server the bus is connected to.
	ServerVersion() string

	// Stream describes one live stream, or returns an error wrapping
	// ErrNoStream when it does not exist.
	Stream(ctx context.Context, name string) (*StreamInfo, error)

	// Snapshot streams the server's snapshot of the stream, consumers included,
	// into data (stream.arc.s2) and meta (backup.json). It closes both writers
	// whether or not it succeeds, as jsm.go does; only a nil error means the
	// snapshot is whole.
	Snapshot(ctx context.Context, stream string, data, meta io.WriteCloser) error

	// Restore re-creates the stream, with the consumers its snapshot carries,
	// from data (stream.arc.s2) and meta (backup.json), streaming. The stream
	// must not exist. On error, a partly created stream may be left behind:
	// the caller deletes it.
	Restore(ctx context.Context, stream string, data, meta io.Reader) error

	// Clustered reports whether the server the bus is connected to is in a
	// JetStream cluster. One that is not refuses a stream with more than
	// one replica, so a restore of one is refused before anything is
	// touched.
	Clustered() bool

	// DeleteStream removes a stream and its consumers. Removing a stream that
	// does not exist returns an error wrapping ErrNoStream.
	DeleteStream(ctx context.Context, stream string) error

	// StreamsTaking names the streams on the bus whose subjects overlap
	// subject (a restore's subject-overlap check asks it of each subject
	// it would take), as the server matches them, without listing every
	// stream.
	StreamsTaking(ctx context.Context, subject string) ([]string, error)

	// Consumers lists every durable consumer on the named streams, with
	// its ack floor and its configuration as the server holds it (metadata
	// included), sorted by stream and consumer; a stream that is gone is
	// skipped. Which module a consumer belongs to is the keeper's business
	// (owners), not the bus's.
	Consumers(ctx context.Context, streams []string) ([]Position, error)

	// Census names every stream on the bus and lists the durable consumers
	// that q may want (CensusQuery.Wants), with their configurations and ack
	// floors as the server holds them: a stream or a consumer made before
	// the call began and still there when it ends is in it. It lists, of
	// each stream that holds a consumer q wants (but the streams of q.Skip),
	// every durable consumer; the keeper's ownership rules read them. The
	// bus answers it without listing every stream (jsbus keeps who owns
	// which consumer from the server's advisories and checks it against the
	// account's totals; see jsbus.Adapter.Census for its guarantee), so its
	// cost follows the module's consumers, not the bus.
	Census(ctx context.Context, q CensusQuery) (streams []string, consumers []Position, err error)

	// SetPosition moves the durable consumer p.Consumer on p.Stream so that
	// the next message it delivers is the one after p.AckFloor (or the
	// stream's first message if that one is gone), keeping the live
	// consumer's own configuration: deliver policy, filters, metadata and
	// all (the server's consumer reset). A consumer of that name that does
	// not exist is made from p.Config as it was recorded, then moved.
	SetPosition(ctx context.Context, p Position) error

	// Consumer reads one durable consumer as Consumers lists it: its ack
	// floor and its configuration as the server holds it. A missing
	// consumer is an error wrapping ErrNotFound, a missing stream one
	// wrapping ErrNoStream. The restore's evidence reads it.
	Consumer(ctx context.Context, stream, consumer string) (*Position, error)

	// SubjectCount is how many subjects of the stream that match filter
	// hold a message (an object store's objects are the subjects of its
	// meta messages). A missing stream is an error wrapping ErrNoStream.
	SubjectCount(ctx context.Context, stream, filter string) (uint64, error)
}

// Index is the `kept` KV bucket: the keeper's index of points, asides and
// plans, and the home of its records. Values are small JSON documents, never
// archive bytes. Keys are dot-separated plain names.
type Index interface {
	// Get returns the value of key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put sets key to value.
	Put(ctx context.Context, key string, value []byte) error
	// Delete removes key; removing a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Keys lists the keys that begin with prefix, sorted.
	Keys(ctx context.Context, prefix string) ([]string, error)
	// KeysUnder lists the keys that begin with any of prefixes, sorted,
	// reading (for prefixes that end in ".") only the keys under them.
	KeysUnder(ctx context.Context, prefixes []string) ([]string, error)

	// Create sets key to value only if the key holds no value (never set,
	// or deleted), and returns the new revision; otherwise it returns an
	// error wrapping ErrExists.
	Create(ctx context.Context, key string, value []byte) (uint64, error)
	// GetRev returns the value of key and its revision, or an error
	// wrapping ErrNotFound.
	GetRev(ctx context.Context, key string) ([]byte, uint64, error)
	// Update sets key to value only if its current revision is rev, and
	// returns the new revision; otherwise an error wrapping ErrRevision.
	Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error)
	// DeleteRev removes key only if its current revision is rev; otherwise
	// an error wrapping ErrRevision. A missing key is not an error.
	DeleteRev(ctx context.Context, key string, rev uint64) error
}

// Errors of the index's compare-and-set writes.
var (
	ErrExists   = errors.New("key already holds a value")
	ErrRevision = errors.New("key was changed by someone else")
)

// Acts records what the keeper did. Record returns only once the act is
// durably stored (acknowledged by the bus).
//
// Two verbs record an act before they remove anything: discard-aside (its
// hand act, outcome "intent") and prune-kept (one "intent" act per point it
// removes); if that act cannot be recorded, nothing is removed. They call
// Record, always: an intent counts only once the bus acknowledged it. The
// other verbs record their act when they end ("done", "failed",
// "planned"); what a restore writes before it removes live data is its
// journal in the index, not an act. Those acts go through Queue when the
// keeper's Acts is an ActsQueue.
type Acts interface {
	// Record stores a durably, or returns why it could not.
	Record(ctx context.Context, a Act) error
}

// ActsQueue is an Acts that can keep an act it cannot record now (the bus
// away, the acts stream not taking messages) and deliver it later, in the
// order acts were given to it.
type ActsQueue interface {
	Acts
	// Queue keeps a durably and delivers it behind every act queued
	// before it; nil once a is kept or recorded. Its error says a is
	// neither: dropped (the queue is full) or not written.
	Queue(ctx context.Context, a Act) error
}

// MaxActID bounds an act's id.
const MaxActID = 64

// NewActID is a fresh act id: 26 characters of lowercase base32 from 128
// random bits, a plain name that is the act's Nats-Msg-Id on every try.
func NewActID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
