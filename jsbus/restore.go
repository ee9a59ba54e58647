package jsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
)

// restoreState is the part of the server's final restore reply the adapter
// checks.
type restoreState struct {
	Msgs     uint64 `json:"messages"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// maxFinalWait bounds the wait for the server to finish a restore after the
// last chunk (jsm.go waits an hour too).
const maxFinalWait = time.Hour

// restore runs the JetStream restore protocol: a restore request carrying
// backup.json as it is, then one request per chunk of data to the deliver
// subject the server names, each acknowledged, then an empty chunk whose
// reply is the created stream.
//
// jsm.go's RestoreSnapshotFromBuffer does the same but sends the first chunk
// at once: on a cluster the stream leader's subscription to the deliver
// subject may not have reached the client's server yet, and the chunk fails
// with "no responders" (seen in this package's cluster test). A chunk that
// met no responder was delivered to no one, so sending it again is safe; this
// does so for a bounded time.
func (a *Adapter) restore(ctx context.Context, stream string, meta []byte, data io.Reader, chunkSize int) (*restoreState, error) {
	var start struct {
		Error          *apiError `json:"error"`
		DeliverSubject string    `json:"deliver_subject"`
	}
	if err := a.request(ctx, "$JS.API.STREAM.RESTORE."+stream, json.RawMessage(meta), &start); err != nil {
		return nil, err
	}
	if start.DeliverSubject == "" {
		return nil, errors.New("the server named no subject to send the snapshot to")
	}
	chunk := make([]byte, chunkSize)
	var sent int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("stopped after %d bytes: %w", sent, err)
		}
		n, err := data.Read(chunk)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the archive after %d bytes: %w", sent, err)
		}
		if n == 0 {
			continue
		}
		reply, err := a.sendChunk(ctx, start.DeliverSubject, chunk[:n], a.cfg.timeout)
		if err != nil {
			return nil, fmt.Errorf("send the archive after %d bytes: %w", sent, err)
		}
		if err := replyError(reply); err != nil {
			return nil, fmt.Errorf("the server refused the archive after %d bytes: %w", sent, err)
		}
		sent += int64(n)
	}
	wait := maxFinalWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	reply, err := a.sendChunk(ctx, start.DeliverSubject, nil, wait)
	if err != nil {
		return nil, fmt.Errorf("finish the restore after %d bytes: %w", sent, err)
	}
	var done struct {
		Error *apiError    `json:"error"`
		State restoreState `json:"state"`
	}
	if err := json.Unmarshal(reply.Data, &done); err != nil {
		return nil, fmt.Errorf("the server's final restore reply is not JSON: %w", err)
	}
	if done.Error != nil {
		return nil, done.Error
	}
	return &done.State, nil
}

// sendChunk sends one chunk and waits up to timeout for its reply, sending it
// again while no responder listens yet (for at most the timeout).
func (a *Adapter) sendChunk(ctx context.Context, subject string, data []byte, timeout time.Duration) (*nats.Msg, error) {
	deadline := time.Now().Add(timeout)
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 250*time.Millisecond) {
		rctx, cancel := context.WithDeadline(ctx, deadline)
		reply, err := a.nc.RequestWithContext(rctx, subject, data)
		cancel()
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().Add(backoff).After(deadline) {
			return reply, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// replyError is the error a chunk's reply carries, if any: a successful
// chunk is acknowledged with an empty message.
func replyError(m *nats.Msg) error {
	if len(m.Data) == 0 {
		return nil
	}
	var r struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("unexpected reply %.100q", m.Data)
	}
	if r.Error != nil {
		return r.Error
	}
	return nil
}
