package jsbus

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// Record publishes the act as JSON to <prefix>.acts.<verb> and returns only
// once the acts stream has acknowledged it.
func (a *Adapter) Record(ctx context.Context, act keeper.Act) error {
	if !validName(act.Verb) {
		return fmt.Errorf("jsbus: act verb %q is not a plain name, so the act was not recorded: %w", act.Verb, keeper.ErrBadRequest)
	}
	if len(act.ID) > keeper.MaxActID || (act.ID != "" && !validName(act.ID)) {
		return fmt.Errorf("jsbus: act id %q is not a plain name of at most %d bytes, so the act was not recorded: %w", act.ID, keeper.MaxActID, keeper.ErrBadRequest)
	}
	b, err := json.Marshal(act)
	if err != nil {
		return fmt.Errorf("jsbus: encode the %s act, so it was not recorded: %w", act.Verb, err)
	}
	if len(b) > actsMaxMsgSize {
		return fmt.Errorf("jsbus: the %s act is %d bytes, over %d, so it was not recorded: %w", act.Verb, len(b), actsMaxMsgSize, keeper.ErrBadRequest)
	}
	subject := a.actsSub + "." + act.Verb
	// The act's own id is its message id on every try and every replay of
	// it (a queue delivering it again after a restart): the acts stream's
	// duplicate window (ActsDuplicates) keeps one copy of an act whose
	// acknowledgement was lost. An act without one (a caller that made it
	// by hand) gets one for its tries.
	id := act.ID
	if id == "" {
		id = nuid.Next()
	}
	var ack *jetstream.PubAck
	err = a.retry(ctx, "record the "+act.Verb+" act", func(ctx context.Context) (err error) {
		ack, err = a.js.Publish(ctx, subject, b, jetstream.WithMsgID(id))
		return err
	})
	if err != nil {
		return busErr(fmt.Errorf("jsbus: the %s act was not acknowledged by the bus, so it is not recorded: %w", act.Verb, err))
	}
	if ack.Stream != a.cfg.acts {
		a.log.Warn("act stored in another stream than the acts stream", "subject", subject, "stream", ack.Stream)
	}
	if ack.Duplicate {
		a.log.Info("act already recorded; the bus kept its first copy", "id", id, "verb", act.Verb, "seq", ack.Sequence)
	}
	a.log.Debug("act recorded", "id", id, "verb", act.Verb, "module", act.Module, "local", act.Local, "outcome", act.Outcome,
		"caller", act.Caller, "what", act.What, "seq", ack.Sequence)
	return nil
}
