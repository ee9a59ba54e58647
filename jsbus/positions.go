package jsbus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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
}

// request sends one JetStream API request and decodes the reply into out,
// returning the API error when the server answers with one.
func (a *Adapter) request(ctx context.Context, subject string, body any, out any) error {
	req, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.cfg.timeout)
		defer cancel()
	}
	msg, err := a.nc.RequestWithContext(ctx, subject, req)
	if err != nil {
		return busErr(err)
	}
	var probe struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &probe); err != nil {
		return fmt.Errorf("the server's reply to %s is not JSON: %w", subject, err)
	}
	if probe.Error != nil {
		return probe.Error
	}
	return json.Unmarshal(msg.Data, out)
}

func isCode(err error, code uint16) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.ErrCode == code
}

// Consumers lists every durable consumer on every stream, with its ack floor
// and its configuration as the server holds it, sorted by stream and
// consumer. The ack floor is the last delivered message when no
// acknowledgement is pending (see rawConsumer.floor). Streams deleted while
// the list is made are skipped.
func (a *Adapter) Consumers(ctx context.Context) ([]keeper.Position, error) {
	names := a.js.StreamNames(ctx)
	var streams []string
	for n := range names.Name() {
		streams = append(streams, n)
	}
	if err := names.Err(); err != nil {
		return nil, busErr(fmt.Errorf("jsbus: list streams: %w", err))
	}
	var out []keeper.Position
	for _, s := range streams {
		if !validName(s) {
			continue
		}
		cs, err := a.consumers(ctx, s)
		if isCode(err, codeStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, busErr(fmt.Errorf("jsbus: list consumers of stream %s: %w", s, err))
		}
		for _, c := range cs {
			var cfg struct {
				Durable string `json:"durable_name"`
			}
			if err := json.Unmarshal(c.Config, &cfg); err != nil {
				return nil, fmt.Errorf("jsbus: configuration of consumer %s on %s is not JSON: %w", c.Name, s, err)
			}
			if cfg.Durable == "" || !validName(c.Name) {
				continue
			}
			out = append(out, keeper.Position{Stream: s, Consumer: c.Name, AckFloor: c.floor(), Config: c.Config})
		}
	}
	slices.SortFunc(out, func(x, y keeper.Position) int {
		return cmp.Or(strings.Compare(x.Stream, y.Stream), strings.Compare(x.Consumer, y.Consumer))
	})
	return out, nil
}

// consumers lists every consumer of one stream, page by page.
func (a *Adapter) consumers(ctx context.Context, stream string) ([]rawConsumer, error) {
	var out []rawConsumer
	for page := 0; page < maxListResponses; page++ {
		var resp consumerListResponse
		if err := a.request(ctx, "$JS.API.CONSUMER.LIST."+stream, map[string]int{"offset": len(out)}, &resp); err != nil {
			return nil, err
		}
		out = append(out, resp.Consumers...)
		if len(resp.Consumers) == 0 || len(out) >= resp.Total {
			return out, nil
		}
	}
	return nil, fmt.Errorf("more than %d pages of consumers", maxListResponses)
}

// SetPosition replaces the durable consumer p.Consumer on p.Stream with one
// made from p.Config that starts at stream sequence p.AckFloor+1 (the server
// starts at the stream's first message when that one is gone), then resets
// it to that sequence so its ack floor reads p.AckFloor on a cluster too.
// Everything else in the recorded configuration is kept.
func (a *Adapter) SetPosition(ctx context.Context, p keeper.Position) error {
	if !validName(p.Stream) || !validName(p.Consumer) {
		return fmt.Errorf("jsbus: position %s > %s does not name a stream and a consumer, so nothing was changed: %w",
			p.Stream, p.Consumer, keeper.ErrBadRequest)
	}
	cfg := map[string]json.RawMessage{}
	if err := json.Unmarshal(p.Config, &cfg); err != nil {
		return fmt.Errorf("jsbus: the recorded configuration of %s > %s is not a JSON object, so nothing was changed: %w: %w",
			p.Stream, p.Consumer, keeper.ErrBadRequest, err)
	}
	for _, field := range []string{"durable_name", "name"} {
		if raw, ok := cfg[field]; ok {
			var v string
			if err := json.Unmarshal(raw, &v); err != nil || (v != "" && v != p.Consumer) {
				return fmt.Errorf("jsbus: the recorded configuration of %s > %s names %s %s, so nothing was changed: %w",
					p.Stream, p.Consumer, field, raw, keeper.ErrBadRequest)
			}
		}
	}
	name, _ := json.Marshal(p.Consumer)
	cfg["durable_name"], cfg["name"] = name, name
	cfg["deliver_policy"] = json.RawMessage(`"by_start_sequence"`)
	cfg["opt_start_seq"] = json.RawMessage(fmt.Sprint(p.AckFloor + 1))
	delete(cfg, "opt_start_time")

	if _, err := a.Stream(ctx, p.Stream); err != nil {
		return fmt.Errorf("%w, so consumer %s was not set back", err, p.Consumer)
	}
	err := a.js.DeleteConsumer(ctx, p.Stream, p.Consumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w, so consumer %s was not set back", noStream(p.Stream, err), p.Consumer)
	case err != nil:
		return busErr(fmt.Errorf("jsbus: delete the live consumer %s on %s to set it back failed, so it was not set back: %w",
			p.Consumer, p.Stream, err))
	}
	var created rawConsumer
	err = a.request(ctx, "$JS.API.CONSUMER.CREATE."+p.Stream+"."+p.Consumer,
		map[string]any{"stream_name": p.Stream, "config": cfg, "action": "create"}, &created)
	if isCode(err, codeStreamNotFound) {
		return fmt.Errorf("%w; consumer %s was deleted and not re-made", noStream(p.Stream, err), p.Consumer)
	}
	if err != nil {
		return busErr(fmt.Errorf("jsbus: re-make consumer %s on %s at ack floor %d failed after the live one was deleted: %w",
			p.Consumer, p.Stream, p.AckFloor, err))
	}
	floor := created.floor()
	// A clustered consumer made at a start sequence reports (and snapshots)
	// ack floor 0 until its first ack; a reset to the same start sequence
	// records the floor in the consumer's replicated state.
	var reset rawConsumer
	err = a.request(ctx, "$JS.API.CONSUMER.RESET."+p.Stream+"."+p.Consumer, map[string]uint64{"seq": p.AckFloor + 1}, &reset)
	if err != nil {
		a.log.Warn("the consumer was set back, but recording its ack floor failed (servers before 2.14 lack the reset API)",
			"stream", p.Stream, "consumer", p.Consumer, "ack_floor", p.AckFloor, "err", err)
	} else {
		floor = reset.AckFloor.Stream
	}
	a.log.Info("set consumer position", "stream", p.Stream, "consumer", p.Consumer, "ack_floor", p.AckFloor,
		"now_ack_floor", floor)
	return nil
}
