package jsbus

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// apiError is the error object of a JetStream API response.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%d)", e.Description, e.ErrCode) }

// rawConsumer is a consumer info with its configuration kept as the server
// sent it.
type rawConsumer struct {
	Name     string          `json:"name"`
	Config   json.RawMessage `json:"config"`
	AckFloor struct {
		Stream uint64 `json:"stream_seq"`
	} `json:"ack_floor"`
	Delivered struct {
		Stream uint64 `json:"stream_seq"`
	} `json:"delivered"`
	NumAckPending int `json:"num_ack_pending"`
	// NumPending is how many messages its leader counts still to deliver.
	NumPending uint64 `json:"num_pending"`
}

// floor is the stream sequence the consumer has acknowledged up to. With no
// acknowledgement pending every delivered message is acknowledged, so the
// floor is the last delivered one: a clustered consumer made at a start
// sequence reports ack floor 0 and delivered start-1 until its first ack.
func (c rawConsumer) floor() uint64 {
	if c.NumAckPending == 0 {
		return max(c.AckFloor.Stream, c.Delivered.Stream)
	}
	return c.AckFloor.Stream
}

type consumerListResponse struct {
	Error     *apiError     `json:"error"`
	Total     int           `json:"total"`
	Offset    int           `json:"offset"`
	Limit     int           `json:"limit"`
	Consumers []rawConsumer `json:"consumers"`
	// Missing names the consumers that did not answer in time on a
	// cluster (no leader yet, or none) and those that are offline; the
	// offline ones are in Consumers too, with only their configuration.
	Missing []string `json:"missing"`
}

// request sends one JetStream API request and decodes the reply into out,
// returning the API error when the server answers with one. The wait for the
// reply is bounded by the adapter's timeout even when ctx allows longer: on a
// cluster some requests go unanswered (a consumer being deleted, a group
// without a leader), and one request must not take a whole verb's time.
func (a *Adapter) request(ctx context.Context, subject string, body any, out any) error {
	return a.retry(ctx, subject, func(ctx context.Context) error { return a.requestOnce(ctx, subject, body, out) })
}

// listGather is how long a clustered server waits for the consumers' leaders
// to answer a consumer list before it names the rest missing (nats-server's
// jsClusteredConsumerListRequest: 4 s), with a margin. A try of a list gets
// at least this long, so that a list that misses a consumer comes back with
// the others instead of being cut short and sent again.
const listGather = 6 * time.Second

// listRequest is request for a list the server gathers from the cluster.
func (a *Adapter) listRequest(ctx context.Context, subject string, body any, out any) error {
	p := a.policy()
	p.Attempt = max(p.Attempt, min(listGather, p.Limit))
	return p.Do(ctx, subject, func(ctx context.Context) error { return a.requestOnce(ctx, subject, body, out) })
}

// durable reports whether a consumer configuration names a durable. The
// server writes a configuration with Go's encoding/json, durable_name first
// (when it is not empty) and no key twice, so most are answered without
// decoding them: a module of 2,000 consumers took some 6 ms of CPU to
// decode them for it.
func durable(cfg json.RawMessage) bool {
	const first = `{"durable_name":"`
	if len(cfg) > len(first) && string(cfg[:len(first)]) == first {
		return cfg[len(first)] != '"'
	}
	if !bytes.Contains(cfg, []byte(`"durable_name"`)) {
		return false
	}
	var c struct {
		Durable string `json:"durable_name"`
	}
	return json.Unmarshal(cfg, &c) == nil && c.Durable != ""
}

// configName is the consumer's name in its configuration: its name, or its
// durable name.
func configName(cfg json.RawMessage) string {
	var c struct {
		Name    string `json:"name"`
		Durable string `json:"durable_name"`
	}
	_ = json.Unmarshal(cfg, &c)
	return cmp.Or(c.Name, c.Durable)
}

// requestOnce is one try of request.
func (a *Adapter) requestOnce(ctx context.Context, subject string, body any, out any) error {
	req, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.timeout)
	defer cancel()
	msg, err := a.nc.RequestWithContext(ctx, a.api(subject), req)
	if err != nil {
		return busErr(err)
	}
	// A reply without the word is no API error: it is decoded once, not
	// probed first (a page of consumers is hundreds of kilobytes).
	if bytes.Contains(msg.Data, []byte(`"error"`)) {
		var probe struct {
			Error *apiError `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &probe); err != nil {
			return fmt.Errorf("the server's reply to %s is not JSON: %w", subject, err)
		}
		if probe.Error != nil {
			return probe.Error
		}
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return fmt.Errorf("the server's reply to %s is not JSON: %w", subject, err)
		}
		return err
	}
	return nil
}

func isCode(err error, code uint16) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.ErrCode == code
}

// A consumer list that misses some durables is asked again missingTries
// times, missingPause apart, and for no more than missingBudget over all
// the streams of one Consumers call: a consumer between leaders gets a new
// one within seconds, and one whose servers are all away does not come
// back by waiting.
const (
	missingTries  = 10
	missingPause  = 500 * time.Millisecond
	missingBudget = 20 * time.Second
)

// Consumers lists every durable consumer on the named streams, with its ack
// floor and its configuration as the server holds it, sorted by stream and
// consumer. The ack floor is the last delivered message when no
// acknowledgement is pending (see rawConsumer.floor). Streams that do not
// exist, or are deleted while the list is made, are skipped.
func (a *Adapter) Consumers(ctx context.Context, streams []string) ([]keeper.Position, error) {
	out, _, err := a.listConsumers(ctx, streams)
	return out, err
}

// listConsumers is Consumers, with how many consumers (durable or not, those
// that did not answer included) each stream listed has.
func (a *Adapter) listConsumers(ctx context.Context, streams []string) ([]keeper.Position, map[string]int, error) {
	out := []keeper.Position{}
	counts := map[string]int{}
	giveUp := time.Now().Add(missingBudget)
	for _, s := range streams {
		if !validName(s) {
			continue
		}
		cs, missing, err := a.consumers(ctx, s)
		// Consumers between leaders (a server of the cluster died) do not
		// answer the list for a moment: ask again, a few times, before
		// going on without them.
		for try := 0; err == nil && len(missing) > 0 && try < missingTries && ctx.Err() == nil && time.Now().Before(giveUp); try++ {
			time.Sleep(missingPause)
			cs, missing, err = a.consumers(ctx, s)
		}
		if len(missing) > 0 {
			a.log.Warn("some consumers did not answer the list (no leader, or offline), so their positions are not read",
				"stream", s, "consumers", missing)
		}
		if isCode(err, codeStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, busErr(fmt.Errorf("jsbus: list consumers of stream %s: %w", s, err))
		}
		counts[s] = len(cs) + len(missing)
		for _, c := range cs {
			if len(c.Config) == 0 { // a RawMessage decoded is JSON: only a missing one is wrong
				return nil, nil, fmt.Errorf("jsbus: consumer %s on %s is listed with no configuration", c.Name, s)
			}
			if !durable(c.Config) || !validName(c.Name) {
				continue
			}
			out = append(out, keeper.Position{Stream: s, Consumer: c.Name, AckFloor: c.floor(), Config: c.Config})
		}
	}
	slices.SortFunc(out, func(x, y keeper.Position) int {
		return cmp.Or(strings.Compare(x.Stream, y.Stream), strings.Compare(x.Consumer, y.Consumer))
	})
	return out, counts, nil
}

// listAhead is how many pages of one stream's consumer list are asked at
// once, once the first page has said how many consumers there are and how
// many a page holds. Each page is a round trip in which the server gathers
// 256 consumer infos and the adapter decodes them; asked one after the
// other, the 8 pages of a module of 2,000 consumers took some 25 ms, most
// of its snapshot-kept.
const listAhead = 4

// consumers lists every consumer of one stream that answered, page by page,
// and names those that did not (see consumerListResponse.Missing). A
// consumer listed twice (an offline one is both listed and missing, and
// pages asked at once may overlap) is listed once.
func (a *Adapter) consumers(ctx context.Context, stream string) ([]rawConsumer, []string, error) {
	var l consumerPages
	offset, total, limit := 0, 0, 0
	for pages := 0; pages < maxListResponses; {
		offsets := []int{offset}
		for next := offset + limit; limit > 0 && next < total && len(offsets) < listAhead; next += limit {
			offsets = append(offsets, next)
		}
		resps, err := a.consumerListPages(ctx, stream, offsets)
		if err != nil {
			return nil, nil, err
		}
		pages += len(offsets)
		end, empty := offset, false
		for i, resp := range resps {
			n := l.add(resp)
			empty = empty || n == 0
			end = max(end, offsets[i]+n)
			total, limit = resp.Total, resp.Limit
		}
		offset = end
		if empty || offset >= total {
			slices.Sort(l.missing)
			return l.out, slices.Compact(l.missing), nil
		}
	}
	return nil, nil, fmt.Errorf("more than %d pages of consumers", maxListResponses)
}

// consumerListPages asks for the pages of a stream's consumer list that
// begin at offsets, at once, and gives them in that order.
func (a *Adapter) consumerListPages(ctx context.Context, stream string, offsets []int) ([]consumerListResponse, error) {
	subject := "$JS.API.CONSUMER.LIST." + stream
	resps := make([]consumerListResponse, len(offsets))
	if len(offsets) == 1 {
		return resps, a.listRequest(ctx, subject, map[string]int{"offset": offsets[0]}, &resps[0])
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(offsets))
	var wg sync.WaitGroup
	for i, off := range offsets {
		wg.Go(func() {
			if errs[i] = a.listRequest(ctx, subject, map[string]int{"offset": off}, &resps[i]); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// The first error in page order, unless it is only the cancel of another's.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	return resps, errors.Join(errs...)
}

// consumerPages gathers the pages of one stream's consumer list.
type consumerPages struct {
	out     []rawConsumer
	missing []string
	seen    map[string]bool
}

// add takes one page and returns how many names it covers, listed or
// missed, once each.
func (l *consumerPages) add(resp consumerListResponse) int {
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	// The page's consumers are the names it lists or misses, once each.
	// An offline one is listed with its configuration and missed: one
	// that is not durable (an ephemeral or ordered consumer whose only
	// server died) is no one's position, so it is not missed either.
	names := map[string]bool{}
	for _, m := range resp.Missing {
		names[m] = true
	}
	for i, c := range resp.Consumers {
		if c.Name == "" { // the server lists an offline consumer by its configuration alone
			c.Name = configName(c.Config)
			resp.Consumers[i].Name = c.Name
		}
		if names[c.Name] && !durable(c.Config) {
			names[c.Name] = false
		}
	}
	for _, m := range resp.Missing {
		if names[m] && !l.seen[m] {
			l.missing = append(l.missing, m)
		}
		names[m] = true
	}
	for _, c := range resp.Consumers {
		if !l.seen[c.Name] && !names[c.Name] {
			l.out = append(l.out, c)
		}
		l.seen[c.Name], names[c.Name] = true, true
	}
	return len(names)
}

// consumerResponse is the reply to a consumer info, create or reset request.
type consumerResponse struct {
	rawConsumer
	ResetSeq uint64 `json:"reset_seq"`
}

// codeConsumerExists answers a create of a consumer that exists with
// another configuration.
const codeConsumerExists = 10148

// codeConsumerCreate is the server's general consumer create failure and
// codeConsumerStore its failure to make the consumer's store.
const (
	codeConsumerCreate = 10012
	codeConsumerStore  = 10104
)

// resetTries bounds how often a reset that met no responder is sent again:
// only the consumer's leader subscribes to the reset subject, so right after
// a clustered consumer is made or loses its leader, and until its leader's
// interest reaches the client's server, a reset finds no one.
const (
	resetTries = 40
	resetPause = 250 * time.Millisecond
)

// SetPosition moves the durable consumer p.Consumer on p.Stream with the
// server's consumer reset, so that the next message it delivers is the one
// after p.AckFloor, or the stream's first message when that one is gone. The
// live consumer is never deleted or re-made: its own configuration (deliver
// policy, filters, metadata, everything) is what it was. A consumer that does
// not exist is made from p.Config as it was recorded, then moved; if the
// server refuses to move it, the one just made is removed again.
//
// The server resets a deliver_policy all consumer to any sequence, a
// by_start_sequence or by_start_time one only to its configured start or
// later, and refuses the other policies; a refused reset leaves the consumer
// where it was and gives an error wrapping keeper.ErrConflict.
//
// After a reset to sequence N the consumer's ack floor and delivered stream
// sequence both read N-1, on every replica of a clustered consumer (the reset
// goes through the consumer's raft group), and its pending acks are dropped.
func (a *Adapter) SetPosition(ctx context.Context, p keeper.Position) error {
	if !validName(p.Stream) || !validName(p.Consumer) {
		return fmt.Errorf("jsbus: position %s > %s does not name a stream and a consumer, so nothing was moved: %w",
			p.Stream, p.Consumer, keeper.ErrBadRequest)
	}
	cfg, err := recordedConfig(p)
	if err != nil {
		return err
	}
	st, err := a.Stream(ctx, p.Stream)
	if err != nil {
		return fmt.Errorf("%w, so consumer %s was not moved", err, p.Consumer)
	}
	live, err := a.consumerInfo(ctx, p.Stream, p.Consumer)
	made := false
	switch {
	case isCode(err, codeConsumerNotFound):
		// When someone else made it meanwhile, live is theirs, and it is
		// the one moved.
		if live, err = a.makeConsumer(ctx, p, cfg); err != nil {
			return err
		}
		made = live == nil
	case isCode(err, codeStreamNotFound):
		return fmt.Errorf("%w, so consumer %s was not moved", noStream(p.Stream, err), p.Consumer)
	case err != nil:
		return busErr(fmt.Errorf("jsbus: look up consumer %s on %s failed, so it was not moved: %w", p.Consumer, p.Stream, err))
	}
	var oldFloor uint64
	if live != nil {
		oldFloor = live.floor()
	}

	seq := max(p.AckFloor+1, st.FirstSeq)
	reset, err := a.reset(ctx, p.Stream, p.Consumer, seq)
	if err != nil {
		return a.resetFailed(ctx, p, seq, made, err)
	}
	a.log.Info("moved consumer", "stream", p.Stream, "consumer", p.Consumer, "made", made,
		"old_ack_floor", oldFloor, "ack_floor", reset.AckFloor.Stream, "next", reset.ResetSeq)
	return nil
}

// recordedConfig is p.Config as an object, checked to name p.Consumer only.
func recordedConfig(p keeper.Position) (map[string]json.RawMessage, error) {
	cfg := map[string]json.RawMessage{}
	if err := json.Unmarshal(p.Config, &cfg); err != nil || cfg == nil {
		return nil, fmt.Errorf("jsbus: the recorded configuration of %s > %s is not a JSON object, so nothing was moved: %w: %w",
			p.Stream, p.Consumer, keeper.ErrBadRequest, cmp.Or(err, errors.New("null")))
	}
	for _, field := range []string{"durable_name", "name"} {
		if raw, ok := cfg[field]; ok {
			var v string
			if err := json.Unmarshal(raw, &v); err != nil || (v != "" && v != p.Consumer) {
				return nil, fmt.Errorf("jsbus: the recorded configuration of %s > %s names %s %s, so nothing was moved: %w",
					p.Stream, p.Consumer, field, raw, keeper.ErrBadRequest)
			}
		}
	}
	return cfg, nil
}

// makeConsumer makes the missing consumer p.Consumer from its recorded
// configuration exactly as recorded. The server's own metadata in it
// (_nats.ver, _nats.level, _nats.req.level) is not refused: the server drops
// and sets those keys itself on every create. It returns
// nil when it made the consumer, and the live one's info when someone else
// made it first.
func (a *Adapter) makeConsumer(ctx context.Context, p keeper.Position, cfg map[string]json.RawMessage) (*consumerResponse, error) {
	name, _ := json.Marshal(p.Consumer)
	cfg["durable_name"], cfg["name"] = name, name
	err := a.createConsumer(ctx, p, cfg)
	switch {
	case err == nil:
		a.log.Info("made missing consumer from its recorded configuration", "stream", p.Stream, "consumer", p.Consumer)
		return nil, nil
	case isCode(err, codeConsumerExists):
		live, err := a.consumerInfo(ctx, p.Stream, p.Consumer)
		if err != nil {
			return nil, busErr(fmt.Errorf("jsbus: consumer %s on %s was made by someone else while it was set back, and looking it up failed, so it was not moved: %w",
				p.Consumer, p.Stream, err))
		}
		a.log.Info("a missing consumer was made by someone else while it was set back; moving that one",
			"stream", p.Stream, "consumer", p.Consumer)
		return live, nil
	case isCode(err, codeStreamNotFound):
		return nil, fmt.Errorf("%w, so consumer %s was not made", noStream(p.Stream, err), p.Consumer)
	default:
		var ae *apiError
		if errors.As(err, &ae) {
			return nil, fmt.Errorf("jsbus: the server refused to make the missing consumer %s on %s from its recorded configuration, so it was not made: %w: %w",
				p.Consumer, p.Stream, keeper.ErrConflict, err)
		}
		return nil, busErr(fmt.Errorf("jsbus: make the missing consumer %s on %s failed; it may or may not have been made, and it was not moved: %w",
			p.Consumer, p.Stream, err))
	}
}

// makeTries bounds how often a create the server failed on its own side
// (createFailedOnServer) is sent; makePause is the wait between two, longer
// than the 100 ms a consumer's store waits between writes of its state.
const (
	makeTries = 3
	makePause = 250 * time.Millisecond
)

// createFailedOnServer reports whether a consumer create failed on the
// server's side rather than being refused for its configuration: a 500 with
// the general create code or the store's. A consumer deleted just before is one
// cause: nats-server (2.15.3) does not wait for the old consumer's state write
// in flight, which can rename its o.dat over the new one's and fail the
// create ("rename …/o.dat.tmp …/o.dat: no such file or directory"). The
// server removes what the failed create made.
func createFailedOnServer(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code >= 500 &&
		(ae.ErrCode == codeConsumerCreate || ae.ErrCode == codeConsumerStore)
}

// createConsumer asks the server to make p.Consumer from cfg, sending the
// create again (makeTries) while it fails on the server's side.
func (a *Adapter) createConsumer(ctx context.Context, p keeper.Position, cfg map[string]json.RawMessage) error {
	body := map[string]any{"stream_name": p.Stream, "config": cfg, "action": "create"}
	for try := 1; ; try++ {
		var created consumerResponse
		err := a.request(ctx, "$JS.API.CONSUMER.CREATE."+p.Stream+"."+p.Consumer, body, &created)
		if !createFailedOnServer(err) || try == makeTries {
			return err
		}
		a.log.Warn("the server failed to make a missing consumer; asking again",
			"stream", p.Stream, "consumer", p.Consumer, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(makePause):
		}
	}
}

// consumerInfo is the live consumer's info, or the server's error.
func (a *Adapter) consumerInfo(ctx context.Context, stream, consumer string) (*consumerResponse, error) {
	var info consumerResponse
	if err := a.request(ctx, "$JS.API.CONSUMER.INFO."+stream+"."+consumer, struct{}{}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// reset asks the consumer's leader to deliver stream sequence seq next. A
// reset that finds no responder (see resetTries) is sent again.
func (a *Adapter) reset(ctx context.Context, stream, consumer string, seq uint64) (consumerResponse, error) {
	var resp consumerResponse
	for try := 1; ; try++ {
		err := a.request(ctx, "$JS.API.CONSUMER.RESET."+stream+"."+consumer, map[string]uint64{"seq": seq}, &resp)
		if !errors.Is(err, nats.ErrNoResponders) || try == resetTries {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return resp, err
		case <-time.After(resetPause):
		}
	}
}

// resetFailed is the error of a reset that failed. A consumer made for it
// is removed again, so a refused position changes nothing.
func (a *Adapter) resetFailed(ctx context.Context, p keeper.Position, seq uint64, made bool, err error) error {
	undone := ""
	if made {
		derr := a.js.DeleteConsumer(context.WithoutCancel(ctx), p.Stream, p.Consumer)
		switch {
		case derr == nil || errors.Is(derr, jetstream.ErrConsumerNotFound):
			undone = "; the consumer made for it from its recorded configuration was removed again"
		default:
			undone = fmt.Sprintf("; the consumer made for it from its recorded configuration is still on the bus, because removing it failed (%v)", derr)
		}
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return fmt.Errorf("jsbus: the server refused to reset consumer %s on %s to sequence %d (for ack floor %d), so it was not moved%s: %w: %w",
			p.Consumer, p.Stream, seq, p.AckFloor, undone, keeper.ErrConflict, err)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return busErr(fmt.Errorf("jsbus: consumer %s on %s answered no reset to sequence %d (it has no leader, or was removed meanwhile), so it was not moved%s: %w",
			p.Consumer, p.Stream, seq, undone, err))
	}
	return busErr(fmt.Errorf("jsbus: reset of consumer %s on %s to sequence %d failed; it may or may not have been moved%s: %w",
		p.Consumer, p.Stream, seq, undone, err))
}
