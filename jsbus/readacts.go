package jsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// StoredAct is one act as the acts stream holds it: the act, or, for a
// message that does not read as one, why (Bad), and where it is.
type StoredAct struct {
	Seq  uint64     // its sequence in the acts stream
	Act  keeper.Act // the act, when Bad is nil
	Bad  error      // why the message is not an act
	Raw  []byte     // the message's first bytes (at most 256), when Bad is set
	Time time.Time  // when the stream stored it
}

// readBatch is how many acts one fetch of ReadActs asks for.
const readBatch = 256

// ReadActs reads the acts stream (ActsStreamFor(prefix)) on nc from its
// first act, or from the first stored at or after since when it is not
// zero, to the last it holds when ReadActs begins, and calls fn with each
// in order. It reads with an ordered consumer, so it needs, besides the
// connection, the right to ask for the stream's info, to make a consumer
// on it and to fetch from it ($JS.API.STREAM.INFO.<stream>,
// $JS.API.CONSUMER.CREATE.<stream>.>, $JS.API.CONSUMER.MSG.NEXT.<stream>.>)
// and its replies (_INBOX.>); it changes nothing. A stream that does not
// exist is an error wrapping keeper.ErrNotFound.
func ReadActs(ctx context.Context, nc *nats.Conn, prefix string, since time.Time, fn func(StoredAct) error) error {
	return ReadActsIn(ctx, nc, "", prefix, since, fn)
}

// ReadActsIn is ReadActs in the JetStream domain domain ("" is the
// connected server's), as a keeper with WithDomain records them.
func ReadActsIn(ctx context.Context, nc *nats.Conn, domain, prefix string, since time.Time, fn func(StoredAct) error) error {
	stream := ActsStreamFor(prefix)
	js, err := jetstream.New(nc)
	if domain != "" {
		js, err = jetstream.NewWithDomain(nc, domain)
	}
	if err != nil {
		return busErr(fmt.Errorf("jsbus: open JetStream to read the acts stream %s: %w", stream, err))
	}
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("there is no acts stream %s on this bus (no keeper with prefix %s has started here), so no act was read: %w", stream, prefix, keeper.ErrNotFound)
	}
	if err != nil {
		return readErr(stream, err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 || (!since.IsZero() && st.LastTime.Before(since)) {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	c, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return readErr(stream, err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return readErr(stream, err)
		}
		batch, err := c.Fetch(readBatch, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return readErr(stream, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				return readErr(stream, err)
			}
			sa := StoredAct{Seq: meta.Sequence.Stream, Time: meta.Timestamp}
			if sa.Act, sa.Bad = DecodeAct(m.Data()); sa.Bad != nil {
				sa.Raw = m.Data()[:min(len(m.Data()), 256)]
			}
			if err := fn(sa); err != nil {
				return err
			}
			if meta.Sequence.Stream >= st.LastSeq || meta.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil {
			return readErr(stream, err)
		}
		if got == 0 { // nothing more came within the wait: the rest was removed meanwhile
			return nil
		}
	}
}

// DecodeAct reads one acts stream message: outside input (whoever may
// publish to <prefix>.acts.> can put one there). It must be one JSON
// object of at most 1 MiB with a verb.
func DecodeAct(data []byte) (keeper.Act, error) {
	if len(data) > actsMaxMsgSize {
		return keeper.Act{}, fmt.Errorf("it is %d bytes, over the %d an act may be", len(data), actsMaxMsgSize)
	}
	var a keeper.Act
	if err := json.Unmarshal(data, &a); err != nil {
		return keeper.Act{}, fmt.Errorf("it is not an act's JSON: %w", err)
	}
	if a.Verb == "" {
		return keeper.Act{}, errors.New("it names no verb")
	}
	return a, nil
}

func readErr(stream string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return fmt.Errorf("jsbus: no answer from JetStream while reading the acts stream %s (is the NATS user allowed to read it? see Permissions in the README): %w: %w", stream, err, keeper.ErrNoBus)
	}
	return busErr(fmt.Errorf("jsbus: reading the acts stream %s: %w", stream, err))
}
