package jsbus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// deleteInFlight bounds the message deletes asked at once.
const deleteInFlight = 128

// codeSequenceNotFound is the server's "sequence not found" (10043): a
// delete that removed nothing.
const (
	codeSequenceNotFound = 10043
	codeMsgDeleteFailed  = 10057
)

// DeleteMessages removes the messages of stream at seqs, each with a
// STREAM.MSG.DELETE that does not erase its bytes (no_erase), up to
// deleteInFlight of them asked at once. A sequence that holds no message
// (deleted already, or past the stream's end) is not an error, so the call
// can be made again after a crash. On an error, some of the sequences may
// be deleted and the rest not; the error says how many were.
func (a *Adapter) DeleteMessages(ctx context.Context, stream string, seqs []uint64) error {
	if !validName(stream) {
		return fmt.Errorf("jsbus: %q is not a stream name: %w", stream, keeper.ErrNoStream)
	}
	for _, s := range seqs {
		if s == 0 {
			return fmt.Errorf("jsbus: sequence 0 holds no message, so no message of stream %s was deleted: %w", stream, keeper.ErrBadRequest)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var done atomic.Int64
	var wg sync.WaitGroup
	slots := make(chan struct{}, deleteInFlight)
	for _, seq := range seqs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := a.deleteMessage(ctx, stream, seq); err != nil {
				cancel(err)
				return
			}
			done.Add(1)
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		if errors.Is(err, keeper.ErrNoStream) {
			return err
		}
		return busErr(fmt.Errorf("jsbus: %d of %d messages of stream %s were deleted, the others may not be: %w",
			done.Load(), len(seqs), stream, err))
	}
	return nil
}

// deleteMessage removes one message, tried again while the cause passes;
// one that is not there is no error.
func (a *Adapter) deleteMessage(ctx context.Context, stream string, seq uint64) error {
	var resp struct {
		Success bool `json:"success"`
	}
	err := a.request(ctx, "$JS.API.STREAM.MSG.DELETE."+stream, map[string]any{"seq": seq, "no_erase": true}, &resp)
	switch {
	case err == nil && !resp.Success:
		return fmt.Errorf("the server did not say it deleted message %d", seq)
	case isCode(err, codeStreamNotFound):
		return noStream(stream, err)
	case isCode(err, codeSequenceNotFound), isCode(err, codeNoMessage), notThere(err):
		return nil
	case err != nil:
		return fmt.Errorf("delete message %d: %w", seq, err)
	}
	return nil
}

// notThere reports the server's failed delete of a message it does not
// hold (its store's "no message found", or "stream store EOF" past the end).
func notThere(err error) bool {
	var api *apiError
	return errors.As(err, &api) && api.ErrCode == codeMsgDeleteFailed &&
		(strings.Contains(api.Description, "no message found") || strings.Contains(api.Description, "stream store EOF"))
}

// Publish stores one message on the bus and returns the sequence its
// stream gave it (the stream's acknowledgement). header is a raw header
// block; the client sends the fields it holds in its own order, so the
// stream stores the same fields, not necessarily the same bytes. A
// message with a Nats-Msg-Id the stream saw within its duplicate window is
// not stored again and the sequence is the one stored first. With a
// JetStream domain, a KV subject ($KV.…) is sent through the domain's API
// prefix, as the client's own KV puts are (the server maps $KV.… there);
// other subjects, object stores' $O.… too, are sent as they are. It is sent once: a
// publish whose acknowledgement is lost may have been stored.
func (a *Adapter) Publish(ctx context.Context, subject string, header, data []byte) (uint64, error) {
	if !validTokens(subject, 4096) {
		return 0, fmt.Errorf("jsbus: %q is not a subject to publish on, so nothing was published: %w", subject, keeper.ErrBadRequest)
	}
	m := nats.NewMsg(a.publishSubject(subject))
	m.Data = data
	if len(header) > 0 {
		h, err := nats.DecodeHeadersMsg(header)
		if err != nil {
			return 0, fmt.Errorf("jsbus: the headers of the message for %s do not parse (%v), so nothing was published: %w", subject, err, keeper.ErrBadRequest)
		}
		m.Header = h
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.timeout)
	defer cancel()
	ack, err := a.js.PublishMsg(ctx, m)
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return 0, fmt.Errorf("jsbus: the server refused the message for %s: %s (%d): %w", subject, api.Description, api.ErrorCode, keeper.ErrConflict)
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return 0, fmt.Errorf("jsbus: no stream took the message for %s (none takes the subject, or its leader did not answer), so it was not stored: %w (%w)",
			subject, keeper.ErrNotFound, err)
	}
	if err != nil {
		return 0, busErr(fmt.Errorf("jsbus: publish a message on %s, which may or may not be stored: %w", subject, err))
	}
	return ack.Sequence, nil
}

// publishSubject is where a message for subject is published: through the
// domain's API prefix for a KV subject in a domain.
func (a *Adapter) publishSubject(subject string) string {
	if a.cfg.domain != "" && strings.HasPrefix(subject, "$KV.") {
		return "$JS." + a.cfg.domain + ".API." + subject
	}
	return subject
}
