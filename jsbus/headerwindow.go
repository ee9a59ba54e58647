package jsbus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// headerWindowSize bounds the messages a read holds while the headers of
// some are read on their own, and so the reads in flight.
const headerWindowSize = 256

// headerWindow gives a read's messages to fn in order. The client gives a
// consumer's headers parsed into a map, which loses their order and
// spacing, so the header block of a message that has one is read as the
// stream holds it, with a STREAM.MSG.GET of its sequence from the stream's
// leader; up to headerWindowSize of them are asked at once while the
// messages before them wait here. A message deleted before its get is no
// longer live and is skipped.
type headerWindow struct {
	a      *Adapter
	ctx    context.Context // canceled when the read ends
	stream string
	fn     func(keeper.Message) error
	queue  []windowed
}

// windowed is one message waiting for fn, and for its header when got is
// not nil.
type windowed struct {
	m   keeper.Message
	got chan storedMsg
}

// storedMsg is a message read by STREAM.MSG.GET, or why it was not.
type storedMsg struct {
	m    keeper.Message
	gone bool // no message at that sequence any more
	err  error
}

// push takes the next delivered message, and gives fn those before it
// that are ready.
func (w *headerWindow) push(m jetstream.Msg, md *jetstream.MsgMetadata) error {
	km := keeper.Message{Seq: md.Sequence.Stream, Time: md.Timestamp.UnixNano(), Subject: m.Subject(), Data: m.Data()}
	e := windowed{m: km}
	if m.Headers() != nil {
		e.got = make(chan storedMsg, 1)
		go func() { e.got <- w.a.storedMessage(w.ctx, w.stream, km.Seq) }()
	} else if len(w.queue) == 0 {
		return w.fn(km)
	}
	w.queue = append(w.queue, e)
	for len(w.queue) > 0 && (len(w.queue) >= headerWindowSize || w.queue[0].got == nil) {
		if err := w.give(); err != nil {
			return err
		}
	}
	return nil
}

// drain gives fn every message still held.
func (w *headerWindow) drain() error {
	for len(w.queue) > 0 {
		if err := w.give(); err != nil {
			return err
		}
	}
	return nil
}

// give gives fn the first message held, waiting for its header.
func (w *headerWindow) give() error {
	e := w.queue[0]
	w.queue[0] = windowed{}
	w.queue = w.queue[1:]
	if e.got == nil {
		return w.fn(e.m)
	}
	var s storedMsg
	select {
	case s = <-e.got:
	case <-w.ctx.Done():
		return context.Cause(w.ctx)
	}
	switch {
	case s.err != nil:
		return s.err
	case s.gone:
		return nil
	case s.m.Subject != e.m.Subject:
		return fmt.Errorf("the stream holds %s at sequence %d, where the consumer delivered %s", s.m.Subject, e.m.Seq, e.m.Subject)
	}
	e.m.Header = s.m.Header
	return w.fn(e.m)
}

// storedMessage reads the message at seq from the stream's leader, with
// its header block as the stream holds it.
func (a *Adapter) storedMessage(ctx context.Context, stream string, seq uint64) storedMsg {
	var resp struct {
		Message struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	err := a.request(ctx, "$JS.API.STREAM.MSG.GET."+stream, map[string]uint64{"seq": seq}, &resp)
	if isCode(err, codeNoMessage) {
		return storedMsg{gone: true}
	}
	if err != nil {
		return storedMsg{err: busErr(fmt.Errorf("read message %d with its headers: %w", seq, err))}
	}
	m := resp.Message
	if m.Seq != seq {
		return storedMsg{err: fmt.Errorf("the server answered a read of message %d with message %d", seq, m.Seq)}
	}
	return storedMsg{m: keeper.Message{Seq: m.Seq, Time: m.Time.UnixNano(), Subject: m.Subject, Header: m.Header, Data: m.Data}}
}
