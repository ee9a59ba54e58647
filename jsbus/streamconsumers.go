package jsbus

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// StreamConsumers lists every consumer of stream, durable and not, sorted
// by name, with the stream sequences it last delivered and has acknowledged
// up to, or returns an error wrapping keeper.ErrNoStream. A consumer that
// did not answer the list (no leader, or offline) is listed by name alone.
// The consumers of a keeper's own reads (Messages, LastBySubject) are left
// out.
func (a *Adapter) StreamConsumers(ctx context.Context, stream string) ([]keeper.ConsumerBrief, error) {
	if !validName(stream) {
		return nil, fmt.Errorf("jsbus: %q is not a stream name: %w", stream, keeper.ErrNoStream)
	}
	cs, missing, err := a.consumers(ctx, stream)
	if isCode(err, codeStreamNotFound) {
		return nil, noStream(stream, err)
	}
	if err != nil {
		return nil, busErr(fmt.Errorf("jsbus: list the consumers of stream %s: %w", stream, err))
	}
	out := make([]keeper.ConsumerBrief, 0, len(cs)+len(missing))
	for _, c := range cs {
		if strings.HasPrefix(c.Name, readerPrefix) && !durable(c.Config) { // a keeper's own read
			continue
		}
		out = append(out, keeper.ConsumerBrief{Name: c.Name, Durable: durable(c.Config), Ordered: looksOrdered(c.Config),
			Delivered: c.Delivered.Stream, AckFloor: c.AckFloor.Stream})
	}
	for _, m := range missing {
		if !slices.ContainsFunc(out, func(b keeper.ConsumerBrief) bool { return b.Name == m }) {
			out = append(out, keeper.ConsumerBrief{Name: m})
		}
	}
	if len(missing) > 0 {
		a.log.Warn("some consumers did not answer the list (no leader, or offline), so they are listed by name alone",
			"stream", stream, "consumers", missing)
	}
	slices.SortFunc(out, func(x, y keeper.ConsumerBrief) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// looksOrdered reports whether a consumer's configuration is one a client
// makes for an ordered consumer: nats.go's jetstream.OrderedConsumer (pull:
// no deliver subject, ack none, in memory, one replica) and its older
// push ordered consumer, which KV watchers and object gets use (a deliver
// subject, ack none, in memory, one replica, flow control and
// heartbeats); neither is durable. An app's own ephemeral pull consumer
// with the same settings looks the same.
func looksOrdered(cfg json.RawMessage) bool {
	var c struct {
		Durable        string `json:"durable_name"`
		AckPolicy      string `json:"ack_policy"`
		MemStorage     bool   `json:"mem_storage"`
		Replicas       int    `json:"num_replicas"`
		DeliverSubject string `json:"deliver_subject"`
		FlowControl    bool   `json:"flow_control"`
		Heartbeat      int64  `json:"idle_heartbeat"`
	}
	if json.Unmarshal(cfg, &c) != nil || c.Durable != "" || c.AckPolicy != "none" || !c.MemStorage || c.Replicas > 1 {
		return false
	}
	return c.DeliverSubject == "" || (c.FlowControl && c.Heartbeat > 0)
}
