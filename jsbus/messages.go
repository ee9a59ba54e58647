package jsbus

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// errNotYet: the message methods are being written.
var errNotYet = errors.New("not implemented yet")

func (a *Adapter) StreamDetail(ctx context.Context, name string) (*keeper.StreamDetail, error) {
	return nil, errNotYet
}

func (a *Adapter) Messages(ctx context.Context, stream string, from, to uint64, fn func(keeper.Message) error) error {
	return errNotYet
}

func (a *Adapter) LastBySubject(ctx context.Context, stream, filter string, fn func(keeper.Message) error) error {
	return errNotYet
}

func (a *Adapter) DeleteMessages(ctx context.Context, stream string, seqs []uint64) error {
	return errNotYet
}

func (a *Adapter) UpdateStream(ctx context.Context, config json.RawMessage) error { return errNotYet }

func (a *Adapter) Publish(ctx context.Context, subject string, header, data []byte) (uint64, error) {
	return 0, errNotYet
}

func (a *Adapter) Downstreams(ctx context.Context, streams []string) ([]keeper.Downstream, error) {
	return nil, errNotYet
}

func (a *Adapter) StreamConsumers(ctx context.Context, stream string) ([]keeper.ConsumerBrief, error) {
	return nil, errNotYet
}
