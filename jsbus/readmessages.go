package jsbus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// How the messages of a stream are read (Messages, LastBySubject): through
// a client's ordered consumer (ephemeral, in memory, acks none), which the
// server pushes in pulls of msgsBatch messages or msgsBytes bytes; a
// measure of 200,000 messages of 100 bytes here took 0.63 s that way, and
// 4.0 s as one STREAM.MSG.GET per message 512 at a time. A message with
// headers is also read on its own (see headerWindow), as the client gives
// a consumer's headers parsed, not as the bytes the stream holds.
const (
	msgsBatch = 1000
	msgsBytes = 8 << 20 // at least twice the connection's max payload
	// readIdle is how long a read waits for the next message before it
	// asks the stream whether one is left to come (a consumer between
	// servers, or the rest deleted meanwhile).
	readIdle = 2 * time.Second
	// readIdleTries bounds those waits in a row: a consumer that delivers
	// nothing for some 2 minutes while messages are left fails the read.
	readIdleTries = 60
	// readStall bounds the same by the clock: the client's ordered
	// consumer makes its consumer again inside Next when the server it was
	// on died (up to 10 tries of 10 s each, deaf to Next's context), so
	// one wait can last minutes; a read that delivered nothing for this
	// long is stopped and fails.
	readStall = 3 * time.Minute
	// readRestartIdle is how many waits of readIdle in a row, with messages
	// left, make a read by start sequence go on with a new consumer, and
	// readRestarts how many times it does.
	readRestartIdle = 10
	readRestarts    = 5
	// readEndBound bounds the delete of a read's consumer once the read
	// ended, its tries included.
	readEndBound = 30 * time.Second
	// maxReadConsumers bounds the consumers endRead deletes for one read.
	maxReadConsumers = 64
	// readInactive is how long the server keeps a read's consumer that
	// pulls nothing (its keeper died): the read deletes it when it ends.
	readInactive = time.Minute
	// readerPrefix begins the names of the reads' consumers, so that
	// StreamConsumers can leave them out.
	readerPrefix = "nats_keeper_read_"
)

// Messages calls fn with every live message of stream in from..to (to 0:
// up to the last sequence the stream had when the call began), in order,
// with its own sequence, time, subject, raw headers and data. Deleted
// sequences are skipped. Messages written after the call began are past
// its end and not read, however long it takes.
func (a *Adapter) Messages(ctx context.Context, stream string, from, to uint64, fn func(keeper.Message) error) error {
	if !validName(stream) {
		return fmt.Errorf("jsbus: %q is not a stream name: %w", stream, keeper.ErrNoStream)
	}
	info, err := a.streamInfo(ctx, stream, false)
	if err != nil {
		return err
	}
	start, end := max(from, info.State.FirstSeq, 1), info.State.LastSeq
	if to != 0 {
		end = min(end, to)
	}
	if start > end || info.State.Msgs == 0 {
		return nil
	}
	r := orderedRead{stream: stream, filter: ">", end: end, cfg: jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start}}
	if err := a.readOrdered(ctx, r, fn); err != nil {
		return fmt.Errorf("jsbus: read messages %d..%d of stream %s: %w", start, end, stream, err)
	}
	return nil
}

// LastBySubject calls fn with the last message of each subject of stream
// matching filter, in stream order: the lasts the stream held when the
// read's consumer was made, then the messages on filter written until the
// consumer had passed them. A subject written meanwhile is given again,
// its later message after its earlier one: a stream that keeps one message
// per subject (a KV bucket of history 1) removes the earlier one, which
// the consumer then skips, and its later one was written before that, so
// the read goes on, once it has passed the stream's last sequence as it
// was right after its consumer was made (all the lasts it was given are at
// or before it), to the stream's last sequence then.
func (a *Adapter) LastBySubject(ctx context.Context, stream, filter string, fn func(keeper.Message) error) error {
	if !validName(stream) {
		return fmt.Errorf("jsbus: %q is not a stream name: %w", stream, keeper.ErrNoStream)
	}
	if !validFilter(filter) {
		return fmt.Errorf("jsbus: %q is not a subject filter, so stream %s was not read: %w", filter, stream, keeper.ErrBadRequest)
	}
	if oneSubject(filter) {
		return a.lastOne(ctx, stream, filter, fn)
	}
	r := orderedRead{stream: stream, filter: filter, endAtStart: true, extend: true, cfg: jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, FilterSubjects: []string{filter}}}
	if err := a.readOrdered(ctx, r, fn); err != nil {
		return fmt.Errorf("jsbus: read the last messages of %s on stream %s: %w", filter, stream, err)
	}
	return nil
}

// validFilter reports a subject filter: tokens, none empty, a * token
// anywhere and a > token last.
func validFilter(f string) bool {
	if f == "" || len(f) > 4096 || strings.ContainsAny(f, " \t\r\n\x00") {
		return false
	}
	tokens := strings.Split(f, ".")
	for i, t := range tokens {
		if t == "" || (len(t) > 1 && strings.ContainsAny(t, "*>")) || (t == ">" && i != len(tokens)-1) {
			return false
		}
	}
	return true
}

// orderedRead is one read of a stream through an ordered consumer: its
// configuration, the filter it reads (">": all), the last stream sequence
// it reads up to (endAtStart: the stream's last once the consumer is
// made), and whether that end moves once, when reached, to the stream's
// last sequence then (extend).
type orderedRead struct {
	stream     string
	filter     string
	end        uint64
	endAtStart bool
	extend     bool
	cfg        jetstream.OrderedConsumerConfig
}

// restartable reports a read that can go on from a sequence with a new
// consumer: one by start sequence (Messages), not one of the last
// messages per subject.
func (r orderedRead) restartable() bool {
	return r.cfg.DeliverPolicy == jetstream.DeliverByStartSequencePolicy
}

// readOrdered calls fn with each message the read's consumer delivers up to
// its end, in order, and stops at the end: at the end sequence, at the
// first message past it, or when the consumer says none is pending and
// the stream confirms none is left up to the end.
//
// A read by start sequence whose consumer delivers nothing for
// readRestartIdle waits while messages are left (its server died, and the
// client's own reset has not brought it back) goes on with a new consumer
// from the sequence after the last it delivered, at most readRestarts times.
func (a *Adapter) readOrdered(ctx context.Context, r orderedRead, fn func(keeper.Message) error) error {
	for restarts := 0; ; restarts++ {
		err := a.readOnce(ctx, r, fn)
		var st *readStalled
		if !errors.As(err, &st) {
			return err
		}
		if restarts == readRestarts {
			return fmt.Errorf("%d consumers in turn stopped delivering, the last after sequence %d, while messages up to %d are left", restarts+1, st.cursor, r.end)
		}
		a.log.Info("a read of a stream delivered nothing while messages are left; reading on with a new consumer",
			"stream", r.stream, "after", st.cursor, "end", r.end, "restart", restarts+1)
		r.cfg.OptStartSeq = max(r.cfg.OptStartSeq, st.cursor+1)
	}
}

// readStalled is a read by start sequence whose consumer stopped
// delivering after cursor (0: delivered nothing), every message up to
// cursor given to fn.
type readStalled struct{ cursor uint64 }

func (e *readStalled) Error() string {
	return fmt.Sprintf("the consumer delivered nothing after sequence %d while messages are left", e.cursor)
}

// readOnce is one consumer's part of readOrdered.
func (a *Adapter) readOnce(ctx context.Context, r orderedRead, fn func(keeper.Message) error) error {
	r.cfg.MaxResetAttempts, r.cfg.InactiveThreshold = 10, readInactive
	// Each try of making the consumer has its own deadline (one sent to a
	// stream leader that died gets no answer, and the verb's context may
	// allow an hour) and a name of its own: the server may have made the
	// consumer of a try whose answer was lost on the server that died,
	// where it is offline, and a try of the same name would meet it there
	// every time. The consumers of the tries before the one that answered
	// are deleted when the read ends.
	var c jetstream.Consumer
	var tried []string
	err := a.retry(ctx, "make a consumer to read stream "+r.stream, func(ctx context.Context) error {
		r.cfg.NamePrefix = readerPrefix + nuid.Next()
		tried = append(tried, r.cfg.NamePrefix+"_1")
		var err error
		c, err = a.js.OrderedConsumer(ctx, r.stream, r.cfg)
		return err
	})
	if err == nil {
		tried = tried[:len(tried)-1]
	}
	defer a.deleteReadConsumers(ctx, r.stream, tried)
	if err == nil {
		var it jetstream.MessagesContext
		if it, err = c.Messages(jetstream.PullMaxMessagesWithBytesLimit(msgsBatch, max(msgsBytes, 2*int(a.nc.MaxPayload())))); err == nil {
			defer a.endRead(ctx, r, c, it)
			return a.readFrom(ctx, r, c, it, fn)
		}
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return noStream(r.stream, err)
	}
	return busErr(err)
}

// endRead stops the read's consumer and deletes it on the server, rather
// than leave it listed among the stream's consumers until its inactive
// threshold, and with it every consumer the client made before it for the
// read (the client names them prefix_1, prefix_2, … as it makes a new one
// after a server died, and deletes the one before once, without trying
// again).
func (a *Adapter) endRead(ctx context.Context, r orderedRead, c jetstream.Consumer, it jetstream.MessagesContext) {
	it.Stop()
	ci := c.CachedInfo()
	if ci == nil {
		return
	}
	serial, err := strconv.Atoi(strings.TrimPrefix(ci.Name, r.cfg.NamePrefix+"_"))
	if err != nil || serial < 1 {
		serial = 1
	}
	names := []string{ci.Name}
	for n := min(serial, maxReadConsumers) - 1; n >= 1; n-- {
		names = append(names, r.cfg.NamePrefix+"_"+strconv.Itoa(n))
	}
	a.deleteReadConsumers(ctx, r.stream, names)
}

// deleteReadConsumers deletes the consumers of a read, each tried again
// while the cause passes (a leader that died just then), all within
// readEndBound; one that still fails is left to the server's inactive
// threshold.
func (a *Adapter) deleteReadConsumers(ctx context.Context, stream string, names []string) {
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readEndBound)
	defer cancel()
	for _, name := range names {
		err := a.retry(ctx, "delete the consumer of a read of stream "+stream, func(ctx context.Context) error {
			err := a.js.DeleteConsumer(ctx, stream, name)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			a.log.Debug("the consumer of a read was not deleted; the server removes it when it has been idle a while",
				"stream", stream, "consumer", name, "err", err)
		}
	}
}

// readFrom is readOrdered's loop over the consumer's messages.
func (a *Adapter) readFrom(ctx context.Context, r orderedRead, c jetstream.Consumer, it jetstream.MessagesContext, fn func(keeper.Message) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := headerWindow{a: a, ctx: ctx, stream: r.stream, fn: fn}
	defer w.close()
	if r.endAtStart {
		info, err := a.streamInfo(ctx, r.stream, false)
		if err != nil {
			return err
		}
		r.end = info.State.LastSeq
	}
	var cursor uint64 // the last stream sequence delivered
	var stalled atomic.Bool
	stall := time.AfterFunc(readStall, func() { stalled.Store(true); it.Stop() })
	defer stall.Stop()
	stopOnEnd := context.AfterFunc(ctx, it.Stop)
	defer stopOnEnd()
	if ci := c.CachedInfo(); ci != nil && ci.NumPending == 0 {
		if fin, err := a.finished(ctx, &r, cursor); err != nil || fin {
			return err
		}
	}
	for idle := 0; ; {
		// A wait of its own, not a context a message: a context with a
		// deadline is four allocations and a child of ctx, a million times
		// for a GiB of 1 KiB messages. ctx ending stops the iterator
		// (stopOnEnd).
		m, err := it.Next(jetstream.NextMaxWait(readIdle))
		if err != nil && ctx.Err() == nil && errors.Is(err, nats.ErrTimeout) {
			if idle++; idle > readIdleTries {
				return fmt.Errorf("the consumer delivered nothing after sequence %d for %d waits of %s while messages up to %d are left",
					cursor, readIdleTries, readIdle, r.end)
			}
			a.log.Debug("a read waited for its next message and got none", "stream", r.stream, "after", cursor, "end", r.end,
				"waited", readIdle, "waits", idle)
			if fin, err := a.finished(ctx, &r, cursor); err != nil || fin {
				return cmpErr(err, w.drain())
			}
			if r.restartable() && idle >= readRestartIdle {
				return cmpErr(w.drain(), &readStalled{cursor})
			}
			continue
		}
		if err != nil && stalled.Load() && r.restartable() {
			return cmpErr(w.drain(), &readStalled{cursor})
		}
		if err != nil && stalled.Load() {
			return fmt.Errorf("the consumer delivered nothing after sequence %d for %s while messages up to %d are left (its server may have died)",
				cursor, readStall, r.end)
		}
		if err != nil {
			return busErr(cmpErr(context.Cause(ctx), err))
		}
		idle = 0
		stall.Reset(readStall)
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if md.Sequence.Stream > r.end { // the consumer has passed the end
			if moved, err := a.extendEnd(ctx, &r); err != nil || !moved || md.Sequence.Stream > r.end {
				return cmpErr(err, w.drain())
			}
		}
		cursor = md.Sequence.Stream
		if err := w.push(m, md); err != nil {
			return err
		}
		if cursor == r.end || md.NumPending == 0 {
			if fin, err := a.finished(ctx, &r, cursor); err != nil || fin {
				return cmpErr(err, w.drain())
			}
		}
	}
}

// finished reports whether the read has nothing left after cursor: no
// message on its filter up to its end, nor, for a read that extends its
// end once, up to the end moved.
func (a *Adapter) finished(ctx context.Context, r *orderedRead, cursor uint64) (bool, error) {
	for {
		if cursor < r.end {
			if left, err := a.leftUpTo(ctx, *r, cursor); err != nil || left {
				return false, err
			}
		}
		if moved, err := a.extendEnd(ctx, r); err != nil || !moved {
			return err == nil, err
		}
	}
}

// extendEnd moves the end of a read that extends it once to the stream's
// last sequence now, and reports whether it moved.
func (a *Adapter) extendEnd(ctx context.Context, r *orderedRead) (bool, error) {
	if !r.extend {
		return false, nil
	}
	r.extend = false
	info, err := a.streamInfo(ctx, r.stream, false)
	if err != nil || info.State.LastSeq <= r.end {
		return false, err
	}
	r.end = info.State.LastSeq
	return true, nil
}

// cmpErr is the first error that is not nil.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// leftUpTo asks the stream's leader whether a message on the read's filter
// is stored after cursor and at most at the read's end.
func (a *Adapter) leftUpTo(ctx context.Context, r orderedRead, cursor uint64) (bool, error) {
	var resp msgGetResponse
	err := a.request(ctx, "$JS.API.STREAM.MSG.GET."+r.stream, map[string]any{"seq": cursor + 1, "next_by_subj": r.filter}, &resp)
	if isCode(err, codeNoMessage) {
		return false, nil
	}
	if isCode(err, codeStreamNotFound) {
		return false, noStream(r.stream, err)
	}
	if err != nil {
		return false, busErr(err)
	}
	return resp.Message.Seq <= r.end, nil
}
