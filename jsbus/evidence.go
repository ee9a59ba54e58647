package jsbus

import (
	"context"

	"fmt"
	"math"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// Consumer reads one durable consumer: its ack floor (rawConsumer.floor) and
// its configuration as the server holds it.
func (a *Adapter) Consumer(ctx context.Context, stream, consumer string) (*keeper.Position, error) {
	if !validName(stream) || !validName(consumer) {
		return nil, fmt.Errorf("jsbus: %s > %s does not name a stream and a consumer: %w", stream, consumer, keeper.ErrBadRequest)
	}
	info, err := a.consumerInfo(ctx, stream, consumer)
	switch {
	case isCode(err, codeStreamNotFound):
		return nil, noStream(stream, err)
	case isCode(err, codeConsumerNotFound):
		return nil, keeper.Errorf(keeper.ErrNotFound, "jsbus: consumer %s on %s does not exist: %w", consumer, stream, err)
	case err != nil:
		return nil, busErr(fmt.Errorf("jsbus: look up consumer %s on %s: %w", consumer, stream, err))
	}
	return &keeper.Position{Stream: stream, Consumer: consumer, AckFloor: info.floor(), Config: info.Config}, nil
}

// subjectsInfo is the part of a stream info reply with a subjects filter
// that SubjectCount reads: the server's count of the matching subjects.
type subjectsInfo struct {
	Total int `json:"total"`
}

// SubjectCount is how many subjects of stream that match filter hold a
// message. It asks for a page past the end, so the server answers with the
// count alone and not the subjects themselves.
func (a *Adapter) SubjectCount(ctx context.Context, stream, filter string) (uint64, error) {
	if !validName(stream) {
		return 0, fmt.Errorf("jsbus: %q is not a stream name: %w", stream, keeper.ErrNoStream)
	}
	var resp subjectsInfo
	err := a.request(ctx, "$JS.API.STREAM.INFO."+stream,
		map[string]any{"subjects_filter": filter, "offset": math.MaxInt32}, &resp)
	switch {
	case isCode(err, codeStreamNotFound):
		return 0, noStream(stream, err)
	case err != nil:
		return 0, busErr(fmt.Errorf("jsbus: count the subjects %s of stream %s: %w", filter, stream, err))
	}
	return uint64(max(resp.Total, 0)), nil
}
