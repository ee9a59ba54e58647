package jsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/keeper"
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
// backup.json as it is, then the chunks of data to the deliver subject the
// server names, each acknowledged, then an empty chunk whose reply is the
// created stream. Up to restoreWindow chunks are in flight at once (see
// pipeline).
//
// jsm.go's RestoreSnapshotFromBuffer does the same but sends the first chunk
// at once: on a cluster the stream leader's subscription to the deliver
// subject may not have reached the client's server yet, and the chunk fails
// with "no responders" (seen in this package's cluster test). A chunk that
// met no responder was delivered to no one, so sending it again is safe; this
// does so for a bounded time.
func (a *Adapter) restore(ctx context.Context, stream string, meta []byte, data io.Reader, chunkSize int) (*restoreState, error) {
	// The chunks in flight are taken from the connection's budget before the
	// server is asked: once asked, the server gives up a restore that gets
	// no chunk for 5 s.
	taken, err := a.flights.take(ctx, a.flights.share(int64(restoreWindow*chunkSize)))
	if err != nil {
		return nil, fmt.Errorf("nothing was restored: %w", err)
	}
	defer a.flights.give(taken)
	window := int(max(1, min(restoreWindow, taken/int64(chunkSize))))
	chunkSize = int(min(int64(chunkSize), taken))
	nc, endLane := a.lane(stream)
	defer endLane()
	// The gate is held until the server has added the stream (see
	// restoresatonce.go); only then do other restores begin beside this one.
	release, err := a.holdStarts(ctx)
	if err != nil {
		return nil, fmt.Errorf("nothing was restored: %w", err)
	}
	defer release()
	var start struct {
		Error          *apiError `json:"error"`
		DeliverSubject string    `json:"deliver_subject"`
	}
	// The request is not cut short by ctx: a restore the server began has
	// to be ended (endRestore), which takes the subject of its reply.
	// A restore request must not be sent twice (a second would find the
	// first's stream): it is tried again only when no one heard it.
	for try := 1; ; try++ {
		err := a.retryUnheard(context.WithoutCancel(ctx), "start the restore of "+stream, func(rctx context.Context) error {
			rctx, cancel := context.WithTimeout(rctx, restoreStartWait)
			defer cancel()
			return a.requestOnce(rctx, "$JS.API.STREAM.RESTORE."+stream, json.RawMessage(meta), &start)
		})
		if err == nil {
			break
		}
		if !startLost(err) || try == restoreStartTries || ctx.Err() != nil {
			return nil, err
		}
		// See restoreStartTries: what the unanswered request made is
		// removed, and the restore asked for again. If the request was
		// answered after all and the answer lost, the server's restore
		// waits for data that never comes and ends itself after its stall
		// timer; a stream is removed only after that (see finishRestore).
		a.log.Warn("a restore's start went unanswered; removing what it may have made and asking again",
			"stream", stream, "try", try, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(serverRestoreStall):
		}
		if derr := a.deleteStream(ctx, stream); derr != nil && !errors.Is(derr, keeper.ErrNoStream) {
			return nil, fmt.Errorf("%w; removing what it may have made failed too: %w", err, derr)
		}
	}
	if start.DeliverSubject == "" {
		return nil, errors.New("the server named no subject to send the snapshot to")
	}
	added := make(chan struct{})
	defer close(added)
	go a.releaseOnceAdded(ctx, stream, release, added)
	sent, err := a.sendData(ctx, nc, start.DeliverSubject, data, chunkSize, window)
	if err != nil {
		var refused *apiError
		if !errors.As(err, &refused) {
			// Given up on this side: end the server's restore too. A
			// restore the server refused has ended there, and it answers
			// no further chunk.
			a.finishRestore(ctx, nc, start.DeliverSubject, sent)
		}
		return nil, err
	}
	return a.finishRestore(ctx, nc, start.DeliverSubject, sent)
}

// finishRestore sends the empty chunk that ends a restore's data and returns
// the server's final reply: the restored stream's state, or why it failed.
//
// It also ends a restore given up part-way (a read error, the context, a lost
// acknowledgement): the server's restore then fails at once and the server is
// done with the half-made stream, instead of waiting out its stall timer (5 s)
// with the stream still being restored. Removing a stream the server is still
// restoring is unsafe: when the stall ends that restore, the server activates
// the removed stream's subscriptions again. So when ctx ends first, the reply
// is still waited for, up to endRestoreWait.
func (a *Adapter) finishRestore(ctx context.Context, nc *nats.Conn, subject string, sent int64) (*restoreState, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("subscribe to the restore's final reply after %d bytes: %w", sent, err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox}); err != nil {
		return nil, fmt.Errorf("finish the restore after %d bytes: %w", sent, err)
	}
	wctx, cancel := context.WithTimeout(ctx, maxFinalWait)
	defer cancel()
	reply, err := sub.NextMsgWithContext(wctx)
	if err != nil && ctx.Err() != nil {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endRestoreWait)
		defer cancel()
		if _, lerr := sub.NextMsgWithContext(lctx); lerr != nil {
			a.log.Warn("the server did not confirm the end of an abandoned restore", "subject", subject, "waited", endRestoreWait, "error", lerr)
		}
		return nil, fmt.Errorf("finish the restore after %d bytes: %w", sent, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("finish the restore after %d bytes: %w", sent, err)
	}
	if reply.Header.Get("Status") == "503" {
		return nil, fmt.Errorf("finish the restore after %d bytes: %w", sent, nats.ErrNoResponders)
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

// endRestoreWait bounds the wait for the server to confirm the end of a
// restore given up part-way: it answers once its restore has taken in what
// it was sent.
const endRestoreWait = 10 * time.Second

// sendData sends the data of a restore the server has accepted to its
// deliver subject over nc, every chunk acknowledged, and returns the bytes
// sent.
func (a *Adapter) sendData(ctx context.Context, nc *nats.Conn, subject string, data io.Reader, chunkSize, window int) (int64, error) {
	// One buffer for every chunk: nats.go has copied (or written) a chunk
	// by the time Publish returns.
	chunk := make([]byte, chunkSize)
	var sent int64
	n, err := readChunk(ctx, data, chunk, sent)
	if errors.Is(err, io.EOF) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// The first chunk waits for its reply, sent again while no one listens
	// yet (see above); once it is answered, the server's subscription is in
	// place and the rest can be pipelined.
	reply, err := sendChunk(ctx, nc, subject, chunk[:n], a.cfg.timeout, a.cfg.timeout)
	if err != nil {
		return 0, fmt.Errorf("send the archive after %d bytes: %w", sent, err)
	}
	if err := replyError(reply); err != nil {
		return 0, fmt.Errorf("the server refused the archive after %d bytes: %w", sent, err)
	}
	sent += int64(n)
	return a.pipeline(ctx, nc, subject, data, chunk, sent, window)
}

// sendChunk sends one chunk and waits up to wait for its reply, sending it
// again while no responder listens yet, for at most retryFor: only the first
// chunk may meet a subscription not yet in place; later, no responder means
// the server's restore is gone.
func sendChunk(ctx context.Context, nc *nats.Conn, subject string, data []byte, wait, retryFor time.Duration) (*nats.Msg, error) {
	retryUntil := time.Now().Add(retryFor)
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 250*time.Millisecond) {
		rctx, cancel := context.WithTimeout(ctx, wait)
		reply, err := nc.RequestWithContext(rctx, subject, data)
		cancel()
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().Add(backoff).After(retryUntil) {
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

// restoreWindow is how many restore chunks may await their acknowledgement at
// once (fewer when the connection's in-flight budget is smaller than that
// many chunks). The server takes the chunks of one restore in order, in the read loop
// of the connection they arrive on, and writes each into the pipe its restore
// goroutine reads (nats-server's processStreamRestore), so a chunk sent before
// the previous one is acknowledged queues behind it in order; it only spares
// the server a round trip of idleness per chunk. The server acknowledges every
// chunk, an error included, in the order it took them.
const restoreWindow = 4

// restoreStartWait bounds the wait for the answer to a restore request. A
// cluster answers once the new stream's group has a leader subscribed to
// the deliver subject, in well under a second on a loaded machine; one
// that never gets a leader (see restoreStartTries) is not answered at all.
const restoreStartWait = 8 * time.Second

// restoreStartTries bounds the starts of one stream's restore that go
// unanswered. On a cluster whose server just died, nats-server places a new
// replicated stream on its peers, the dead one included until it counts as
// offline (up to 2.5 minutes after a kill: five missed 30 s heartbeats), and
// picks a preferred leader at random among them; the other peers wait for
// the preferred one (the group's ScaleUp), so when the dead server is
// picked the group never gets a leader and the restore is never answered
// (nats-server 2.15.3, jsClusteredStreamRestoreRequest and
// setPreferredMember). Asked again, the pick is made anew.
const restoreStartTries = 6

// serverRestoreStall is a little over nats-server's own stall timer for a
// restore that gets no data (its activityInterval, 5 s).
const serverRestoreStall = 6 * time.Second

// startLost reports whether a restore's start got no answer in its time.
func startLost(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// chunkAckWait bounds the wait for one chunk's acknowledgement once the
// server has taken the first: it acknowledges each chunk once it has written
// it into its restore, and gives up a restore that gets no chunk for 5 s
// (nats-server's activityInterval). An acknowledgement this late means the
// chunk or its answer was lost, as when the stream's leader moves while a
// server of the cluster dies; waiting the whole request timeout (30 s) for
// it only delays restoring the stream again.
const chunkAckWait = 15 * time.Second

// readChunk reads the next chunk from data; io.EOF means no byte is left.
// Bytes a reader returns together with io.EOF are a chunk like any other:
// the io.EOF comes again on the next read.
func readChunk(ctx context.Context, data io.Reader, chunk []byte, sent int64) (int, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("stopped after %d bytes: %w", sent, err)
		}
		n, err := data.Read(chunk)
		if n > 0 && errors.Is(err, io.EOF) {
			return n, nil
		}
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		if err != nil {
			return 0, fmt.Errorf("read the archive after %d bytes: %w", sent, err)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// pipeline sends the rest of data in chunks with up to window (at most
// restoreWindow) of them awaiting acknowledgement, and returns once every chunk is acknowledged, or
// at the first refusal, missing acknowledgement or read error. It returns the
// bytes acknowledged.
func (a *Adapter) pipeline(ctx context.Context, nc *nats.Conn, subject string, data io.Reader, chunk []byte, acked int64, window int) (int64, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return acked, fmt.Errorf("subscribe to the restore acknowledgements after %d bytes: %w", acked, err)
	}
	defer sub.Unsubscribe()
	inFlight := make([]int, window) // sizes of the chunks awaiting acknowledgement, oldest at head
	head, count := 0, 0
	awaitOne := func() error {
		wait := min(a.cfg.timeout, chunkAckWait)
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		m, err := sub.NextMsgWithContext(wctx)
		if err != nil {
			return fmt.Errorf("no acknowledgement of the chunk after %d bytes within %s: %w", acked, wait, err)
		}
		if m.Header.Get("Status") == "503" {
			return fmt.Errorf("send the archive after %d bytes: %w", acked, nats.ErrNoResponders)
		}
		if err := replyError(m); err != nil {
			return fmt.Errorf("the server refused the archive after %d bytes: %w", acked, err)
		}
		acked += int64(inFlight[head])
		head, count = (head+1)%window, count-1
		return nil
	}
	for {
		n, err := readChunk(ctx, data, chunk, acked)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return acked, err
		}
		if count == window {
			if err := awaitOne(); err != nil {
				return acked, err
			}
		}
		if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Data: chunk[:n]}); err != nil {
			return acked, fmt.Errorf("send the archive after %d bytes: %w", acked, err)
		}
		inFlight[(head+count)%window] = n
		count++
	}
	for count > 0 {
		if err := awaitOne(); err != nil {
			return acked, err
		}
	}
	return acked, nil
}
