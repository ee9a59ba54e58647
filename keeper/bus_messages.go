package keeper

import (
	"context"
	"encoding/json"
)

// Message is one message as a stream stores it: its own sequence, time,
// subject, headers and data. The diff, the delta restore and the logical
// restore read and write them.
type Message struct {
	Seq     uint64 // the stream sequence
	Time    int64  // when the stream stored it, in Unix nanoseconds
	Subject string
	Header  []byte // the raw header block ("NATS/1.0\r\n…\r\n\r\n"); nil without headers
	Data    []byte
}

// StreamDetail is one live stream as a diff or a restore method reads it.
type StreamDetail struct {
	StreamInfo
	// Config is the stream's configuration as the server holds it.
	Config json.RawMessage
	// Deleted is every deleted sequence inside FirstSeq..LastSeq, sorted
	// (the server's deleted details).
	Deleted []uint64
	// Created is when the stream was made, in Unix nanoseconds.
	Created int64
}

// Downstream is a stream that mirrors or sources another (its upstream).
type Downstream struct {
	Stream   string // the stream that mirrors or sources
	Kind     string // "mirror" or "source"
	Upstream string // the stream it mirrors or sources
}

// ConsumerBrief is one consumer of a stream, durable or not.
type ConsumerBrief struct {
	Name    string
	Durable bool // a durable consumer (else ephemeral)
	// Ordered: it looks like a client's ordered consumer (a KV watcher,
	// an object get): ephemeral, push or pull, ack none, in memory, one
	// replica, flow control or heartbeats.
	Ordered   bool
	Delivered uint64 // the stream sequence last delivered
	AckFloor  uint64
}

// MessageBus is what the restore methods and the diff need of the bus
// beyond Bus: messages read and written one by one, a stream's details and
// configuration, who mirrors or sources it and who reads it. Bus embeds it.
type MessageBus interface {
	// StreamDetail describes one live stream with its configuration and
	// its deleted sequences, or returns an error wrapping ErrNoStream.
	StreamDetail(ctx context.Context, name string) (*StreamDetail, error)

	// Messages calls fn with every live message of stream whose sequence
	// is in from..to (to 0: up to the last), in order, with its own
	// sequence, time, subject, headers and data. Deleted sequences are
	// skipped. fn's error stops it and is returned.
	Messages(ctx context.Context, stream string, from, to uint64, fn func(Message) error) error

	// LastBySubject calls fn with the last message of each subject of
	// stream matching filter (a KV bucket's keys, an object store's
	// metas), in no set order.
	LastBySubject(ctx context.Context, stream, filter string, fn func(Message) error) error

	// DeleteMessages removes the messages of stream at seqs. A sequence
	// that holds no message (already deleted) is not an error: the call
	// can be made again after a crash.
	DeleteMessages(ctx context.Context, stream string, seqs []uint64) error

	// UpdateStream sets a live stream's configuration to config (a stream
	// update: only the fields the server lets an update change).
	UpdateStream(ctx context.Context, config json.RawMessage) error

	// Publish stores one message on the bus (its subject decides the
	// stream) and returns the sequence the stream gave it.
	Publish(ctx context.Context, subject string, header, data []byte) (uint64, error)

	// Downstreams lists every stream of the account that mirrors or sources
	// one of streams (matched by name, in this account).
	Downstreams(ctx context.Context, streams []string) ([]Downstream, error)

	// StreamConsumers lists every consumer of stream, durable and
	// ephemeral.
	StreamConsumers(ctx context.Context, stream string) ([]ConsumerBrief, error)
}
