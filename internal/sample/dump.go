package sample

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxMessages bounds how many messages Dump reads from one stream.
const MaxMessages = 200_000

// inlineLimit is the largest payload a Message keeps as text.
const inlineLimit = 256

// Snapshot is the observable state of some streams: what a restore must give
// back exactly.
type Snapshot struct {
	Streams []StreamDump
}

// StreamDump is one stream's state, messages and consumers.
type StreamDump struct {
	Name      string
	Missing   bool // the stream does not exist
	Subjects  []string
	Replicas  int
	FirstSeq  uint64
	LastSeq   uint64
	Msgs      uint64
	Bytes     uint64
	Messages  []Message
	Consumers []ConsumerDump
}

// Message is one stored message.
type Message struct {
	Seq     uint64
	Subject string
	Header  map[string][]string
	Time    time.Time
	Size    int
	SHA256  string
	Text    string // the payload itself when it is at most 256 bytes
}

// ConsumerDump is one consumer as a restore must give it back. AckFloor is
// the stream sequence acknowledged up to; with no acknowledgement pending that
// is the last delivered message (a clustered consumer made at a start sequence
// reports ack floor 0 until its first ack, and behaves the same). Next is the
// stream sequence of the message it would deliver next from its ack floor (0
// when there is none), computed from the stored messages, not by fetching.
type ConsumerDump struct {
	Name           string
	Durable        string
	FilterSubjects []string
	AckPolicy      string
	AckFloor       uint64
	NumPending     uint64
	NumAckPending  int
	Next           uint64
}

// Dump reads every message and consumer of the named streams, without moving
// any consumer. A stream that does not exist is recorded as Missing.
func Dump(ctx context.Context, js jetstream.JetStream, streams ...string) (*Snapshot, error) {
	snap := &Snapshot{}
	for _, name := range streams {
		d, err := dumpStream(ctx, js, name)
		if err != nil {
			return nil, err
		}
		snap.Streams = append(snap.Streams, *d)
	}
	return snap, nil
}

func dumpStream(ctx context.Context, js jetstream.JetStream, name string) (*StreamDump, error) {
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return &StreamDump{Name: name, Missing: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sample: look up stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("sample: stream info of %s: %w", name, err)
	}
	d := &StreamDump{
		Name: name, Subjects: info.Config.Subjects, Replicas: info.Config.Replicas,
		FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Msgs: info.State.Msgs, Bytes: info.State.Bytes,
	}
	if d.Msgs > MaxMessages {
		return nil, fmt.Errorf("sample: stream %s holds %d messages, more than the %d a dump reads", name, d.Msgs, MaxMessages)
	}
	if d.Msgs > 0 {
		if d.Messages, err = readSpans(ctx, js, name, d.FirstSeq, d.LastSeq); err != nil {
			return nil, err
		}
	}
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		d.Consumers = append(d.Consumers, consumerOf(ci, d.Messages))
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("sample: list consumers of %s: %w", name, err)
	}
	slices.SortFunc(d.Consumers, func(a, b ConsumerDump) int { return strings.Compare(a.Name, b.Name) })
	return d, nil
}

var errNoMessage = errors.New("no message")

// Dumps read a stream's messages with dumpWorkers requests in flight, each
// over a span of dumpSpan sequences, so a big stream is read in a few
// seconds rather than one round trip after another.
const (
	dumpWorkers = 4
	dumpSpan    = 256
)

// readSpans reads every message from first to last, span by span, in order.
func readSpans(ctx context.Context, js jetstream.JetStream, stream string, first, last uint64) ([]Message, error) {
	spans := int((last-first)/dumpSpan + 1)
	out := make([][]Message, spans)
	errs := make([]error, spans)
	next := make(chan int)
	var wg sync.WaitGroup
	for range dumpWorkers {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = readSpan(ctx, js, stream, first+uint64(i)*dumpSpan, min(first+uint64(i)*dumpSpan+dumpSpan-1, last))
			}
		})
	}
	for i := range spans {
		next <- i
	}
	close(next)
	wg.Wait()
	var msgs []Message
	for i := range spans {
		if errs[i] != nil {
			return nil, errs[i]
		}
		msgs = append(msgs, out[i]...)
		if len(msgs) > MaxMessages {
			return nil, fmt.Errorf("sample: stream %s holds more than the %d messages a dump reads", stream, MaxMessages)
		}
	}
	return msgs, nil
}

// readSpan reads the messages of sequences lo..hi.
func readSpan(ctx context.Context, js jetstream.JetStream, stream string, lo, hi uint64) ([]Message, error) {
	var out []Message
	for seq := lo; seq <= hi; {
		m, err := nextMsg(ctx, js, stream, seq)
		if errors.Is(err, errNoMessage) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("sample: read message %d of %s: %w", seq, stream, err)
		}
		if m.Seq < seq {
			return nil, fmt.Errorf("sample: asked %s for message %d or later and got %d", stream, seq, m.Seq)
		}
		if m.Seq > hi {
			break
		}
		out = append(out, m)
		seq = m.Seq + 1
	}
	return out, nil
}

// nextMsg reads the first message at or after seq through the stream
// leader's message API (never a direct get, which a lagging replica may
// answer on a cluster).
func nextMsg(ctx context.Context, js jetstream.JetStream, stream string, seq uint64) (Message, error) {
	req, _ := json.Marshal(map[string]any{"seq": seq, "next_by_subj": ">"})
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	reply, err := js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return Message{}, err
	}
	var resp struct {
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return Message{}, fmt.Errorf("the reply is not JSON: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == 10037 { // no message found
			return Message{}, errNoMessage
		}
		return Message{}, fmt.Errorf("%s (%d)", resp.Error.Description, resp.Error.ErrCode)
	}
	if resp.Message == nil {
		return Message{}, errors.New("the reply holds no message")
	}
	rm := resp.Message
	sum := sha256.Sum256(rm.Data)
	msg := Message{
		Seq: rm.Seq, Subject: rm.Subject, Time: rm.Time.UTC(), Size: len(rm.Data),
		SHA256: hex.EncodeToString(sum[:]),
	}
	if len(rm.Data) <= inlineLimit {
		msg.Text = string(rm.Data)
	}
	if len(rm.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(rm.Header)
		if err != nil {
			return Message{}, fmt.Errorf("headers of message %d: %w", rm.Seq, err)
		}
		msg.Header = map[string][]string{}
		for k, v := range h {
			msg.Header[k] = slices.Clone(v)
		}
	}
	return msg, nil
}

func consumerOf(ci *jetstream.ConsumerInfo, msgs []Message) ConsumerDump {
	filters := slices.Clone(ci.Config.FilterSubjects)
	if ci.Config.FilterSubject != "" {
		filters = append(filters, ci.Config.FilterSubject)
	}
	slices.Sort(filters)
	c := ConsumerDump{
		Name: ci.Name, Durable: ci.Config.Durable, FilterSubjects: filters,
		AckPolicy: ci.Config.AckPolicy.String(), AckFloor: ci.AckFloor.Stream,
		NumPending: ci.NumPending, NumAckPending: ci.NumAckPending,
	}
	if ci.NumAckPending == 0 && ci.Delivered.Stream > c.AckFloor {
		c.AckFloor = ci.Delivered.Stream
	}
	for _, m := range msgs {
		if m.Seq > c.AckFloor && matchesAny(filters, m.Subject) {
			c.Next = m.Seq
			break
		}
	}
	return c
}

func matchesAny(filters []string, subject string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if SubjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// SubjectMatches reports whether subject matches the filter, with NATS
// wildcards: `*` matches one token, `>` one or more trailing tokens.
func SubjectMatches(filter, subject string) bool {
	ft := strings.Split(filter, ".")
	st := strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}
