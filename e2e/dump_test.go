package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// dumpWorkers is how many message reads a dump keeps in flight.
const dumpWorkers = 4

// dumpSpan is how many sequences one read worker walks at a time.
const dumpSpan = 256

// dumpKept is sample.Dump with the messages read by several workers at
// once, each walking its own span of sequences the way sample.Dump walks the
// whole stream (through the leader's message API, first message at or after
// a sequence): the same snapshot, in a fraction of the time for a big
// stream.
func dumpKept(ctx context.Context, js jetstream.JetStream, streams ...string) (*sample.Snapshot, error) {
	snap := &sample.Snapshot{}
	for _, name := range streams {
		d, err := dumpOne(ctx, js, name)
		if err != nil {
			return nil, err
		}
		snap.Streams = append(snap.Streams, *d)
	}
	return snap, nil
}

func dumpOne(ctx context.Context, js jetstream.JetStream, name string) (*sample.StreamDump, error) {
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return &sample.StreamDump{Name: name, Missing: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dump: look up stream %s: %w", name, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dump: stream info of %s: %w", name, err)
	}
	d := &sample.StreamDump{
		Name: name, Subjects: info.Config.Subjects, Replicas: info.Config.Replicas,
		FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Msgs: info.State.Msgs, Bytes: info.State.Bytes,
	}
	if d.Msgs > sample.MaxMessages {
		return nil, fmt.Errorf("dump: stream %s holds %d messages, more than the %d a dump reads", name, d.Msgs, sample.MaxMessages)
	}
	if d.Msgs > 0 {
		if d.Messages, err = readSpans(ctx, js.Conn(), name, d.FirstSeq, d.LastSeq); err != nil {
			return nil, err
		}
	}
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		d.Consumers = append(d.Consumers, consumerDump(ci, d.Messages))
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("dump: list consumers of %s: %w", name, err)
	}
	slices.SortFunc(d.Consumers, func(a, b sample.ConsumerDump) int { return strings.Compare(a.Name, b.Name) })
	return d, nil
}

// readSpans reads every message from first to last, span by span.
func readSpans(ctx context.Context, nc *nats.Conn, stream string, first, last uint64) ([]sample.Message, error) {
	spans := int((last-first)/dumpSpan + 1)
	out := make([][]sample.Message, spans)
	errs := make([]error, spans)
	next := make(chan int)
	var wg sync.WaitGroup
	for range dumpWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				lo := first + uint64(i)*dumpSpan
				hi := min(lo+dumpSpan-1, last)
				for seq := lo; seq <= hi; {
					m, err := readMsg(ctx, nc, stream, seq)
					if errors.Is(err, errNoMsg) {
						break
					}
					if err != nil {
						errs[i] = fmt.Errorf("dump: read message %d of %s: %w", seq, stream, err)
						break
					}
					if m.Seq < seq {
						errs[i] = fmt.Errorf("dump: asked %s for message %d or later and got %d", stream, seq, m.Seq)
						break
					}
					if m.Seq > hi {
						break
					}
					out[i] = append(out[i], m)
					seq = m.Seq + 1
				}
			}
		}()
	}
	for i := range spans {
		next <- i
	}
	close(next)
	wg.Wait()
	var msgs []sample.Message
	for i := range spans {
		if errs[i] != nil {
			return nil, errs[i]
		}
		msgs = append(msgs, out[i]...)
	}
	if len(msgs) > sample.MaxMessages {
		return nil, fmt.Errorf("dump: stream %s holds more than the %d messages a dump reads", stream, sample.MaxMessages)
	}
	return msgs, nil
}

var errNoMsg = errors.New("no message")

// readMsg reads the first message at or after seq, as sample.Dump does.
func readMsg(ctx context.Context, nc *nats.Conn, stream string, seq uint64) (sample.Message, error) {
	req, _ := json.Marshal(map[string]any{"seq": seq, "next_by_subj": ">"})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reply, err := nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return sample.Message{}, err
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
		return sample.Message{}, fmt.Errorf("the reply is not JSON: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == 10037 { // no message found
			return sample.Message{}, errNoMsg
		}
		return sample.Message{}, fmt.Errorf("%s (%d)", resp.Error.Description, resp.Error.ErrCode)
	}
	if resp.Message == nil {
		return sample.Message{}, errors.New("the reply holds no message")
	}
	rm := resp.Message
	sum := sha256.Sum256(rm.Data)
	msg := sample.Message{
		Seq: rm.Seq, Subject: rm.Subject, Time: rm.Time.UTC(), Size: len(rm.Data),
		SHA256: hex.EncodeToString(sum[:]),
	}
	if len(rm.Data) <= 256 {
		msg.Text = string(rm.Data)
	}
	if len(rm.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(rm.Header)
		if err != nil {
			return sample.Message{}, fmt.Errorf("headers of message %d: %w", rm.Seq, err)
		}
		msg.Header = map[string][]string{}
		for k, v := range h {
			msg.Header[k] = slices.Clone(v)
		}
	}
	return msg, nil
}

// consumerDump is one consumer as sample.Dump records it.
func consumerDump(ci *jetstream.ConsumerInfo, msgs []sample.Message) sample.ConsumerDump {
	filters := slices.Clone(ci.Config.FilterSubjects)
	if ci.Config.FilterSubject != "" {
		filters = append(filters, ci.Config.FilterSubject)
	}
	slices.Sort(filters)
	c := sample.ConsumerDump{
		Name: ci.Name, Durable: ci.Config.Durable, FilterSubjects: filters,
		AckPolicy: ci.Config.AckPolicy.String(), AckFloor: ci.AckFloor.Stream,
		NumPending: ci.NumPending, NumAckPending: ci.NumAckPending,
	}
	if ci.NumAckPending == 0 && ci.Delivered.Stream > c.AckFloor {
		c.AckFloor = ci.Delivered.Stream
	}
	for _, m := range msgs {
		if m.Seq > c.AckFloor && filterMatches(filters, m.Subject) {
			c.Next = m.Seq
			break
		}
	}
	return c
}

// TestDumpKeptIsSampleDump: dumpKept, which the tests compare kept data
// with, gives exactly what sample.Dump gives, interior gaps, headers,
// consumers and all, over spans of sequences that end inside the stream.
func TestDumpKeptIsSampleDump(t *testing.T) {
	const module, local = "dump", "same"
	tmp := t.TempDir()
	srv := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	nc := connect(t, srv.url())
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(512))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sample.Create(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	fillBulk(t, js, module, local, 24*mib, 7)
	if err := sample.Change(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, sample.NamesOf(module, local).Stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{dumpSpan, dumpSpan + 1, 2*dumpSpan - 1} { // gaps at the edges of spans
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatalf("delete message %d: %v", seq, err)
		}
	}
	streams := append(keptStreams(module, local), "NO_SUCH_STREAM")
	want, err := sample.Dump(ctx, js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dumpKept(ctx, js, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(want, got); d != "" {
		t.Errorf("dumpKept differs from sample.Dump:\n%s", d)
	}
	n := 0
	for _, d := range got.Streams {
		n += len(d.Messages)
	}
	if n < 3*dumpSpan || !got.Streams[len(got.Streams)-1].Missing {
		t.Errorf("the comparison is too small to mean anything: %d messages, the missing stream recorded missing: %v", n, got.Streams[len(got.Streams)-1].Missing)
	}
}
