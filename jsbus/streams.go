package jsbus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// JetStream error codes the adapter maps to keeper sentinels.
const (
	codeStreamNotFound     = 10059
	codeConsumerNotFound   = 10014
	codeStreamExistRestore = 10130
	codeStreamNameExist    = 10058
	codeStreamRestore      = 10062 // a restore failed part way (JSStreamRestoreErrF)
)

func noStream(stream string, err error) error {
	return fmt.Errorf("jsbus: stream %s does not exist: %w (%w)", stream, keeper.ErrNoStream, err)
}

// Stream describes one live stream, or returns an error wrapping
// keeper.ErrNoStream.
func (a *Adapter) Stream(ctx context.Context, name string) (*keeper.StreamInfo, error) {
	if !validName(name) {
		return nil, fmt.Errorf("jsbus: %q is not a stream name: %w", name, keeper.ErrNoStream)
	}
	var s jetstream.Stream
	err := a.retry(ctx, "look up stream "+name, func(ctx context.Context) (err error) {
		s, err = a.js.Stream(ctx, name)
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, noStream(name, err)
	}
	if err != nil {
		return nil, busErr(fmt.Errorf("jsbus: look up stream %s: %w", name, err))
	}
	info := s.CachedInfo()
	return &keeper.StreamInfo{
		Name: name, Subjects: info.Config.Subjects, Messages: info.State.Msgs, Bytes: info.State.Bytes,
		FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq, Consumers: info.State.Consumers,
		NumSubjects: info.State.NumSubjects, Made: info.Created.UnixNano(),
	}, nil
}

// Streams lists every stream on the bus with its subjects and state, page
// by page. A stream whose leader did not answer the list (on a cluster) or
// that is offline is listed by name alone with Consumers -1: it may hold
// consumers, and who lists them must ask it.
func (a *Adapter) Streams(ctx context.Context) ([]keeper.StreamInfo, error) {
	return a.streamsWith(ctx, nil)
}

// streamsWith is Streams, giving each stream's upstreams to ups (when not
// nil) as it lists it. A stream listed by name alone is not given.
func (a *Adapter) streamsWith(ctx context.Context, ups func(stream string, c upstreamConfig)) ([]keeper.StreamInfo, error) {
	out, err := a.listStreams(ctx, ups) // each page is retried on its own
	if err != nil {
		return nil, busErr(fmt.Errorf("jsbus: list streams: %w", err))
	}
	return out, nil
}

// streamListResponse is a page of the server's stream list, with only what
// Streams and streamsWith keep of each stream.
type streamListResponse struct {
	Total   int `json:"total"`
	Streams []struct {
		Config struct {
			Name     string   `json:"name"`
			Subjects []string `json:"subjects"`
			upstreamConfig
		} `json:"config"`
		State struct {
			Msgs      uint64 `json:"messages"`
			Bytes     uint64 `json:"bytes"`
			FirstSeq  uint64 `json:"first_seq"`
			LastSeq   uint64 `json:"last_seq"`
			Consumers int    `json:"consumer_count"`
		} `json:"state"`
	} `json:"streams"`
	Missing []string          `json:"missing"`
	Offline map[string]string `json:"offline"`
}

// listStreams lists the streams page by page, giving each one's upstreams
// to ups, when not nil.
func (a *Adapter) listStreams(ctx context.Context, ups func(stream string, c upstreamConfig)) ([]keeper.StreamInfo, error) {
	var out []keeper.StreamInfo
	seen := map[string]bool{}
	for offset, page := 0, 0; page < maxListResponses; page++ {
		var resp streamListResponse
		if err := a.listRequest(ctx, "$JS.API.STREAM.LIST", map[string]int{"offset": offset}, &resp); err != nil {
			return nil, err
		}
		n := 0
		for _, s := range resp.Streams {
			n++
			if seen[s.Config.Name] {
				continue
			}
			seen[s.Config.Name] = true
			if ups != nil {
				ups(s.Config.Name, s.Config.upstreamConfig)
			}
			out = append(out, keeper.StreamInfo{
				Name: s.Config.Name, Subjects: s.Config.Subjects, Messages: s.State.Msgs, Bytes: s.State.Bytes,
				FirstSeq: s.State.FirstSeq, LastSeq: s.State.LastSeq, Consumers: s.State.Consumers,
			})
		}
		unknown := slices.Sorted(maps.Keys(resp.Offline))
		for _, name := range append(unknown, resp.Missing...) {
			n++
			if !seen[name] {
				seen[name] = true
				out = append(out, keeper.StreamInfo{Name: name, Consumers: -1})
			}
		}
		offset += n
		if n == 0 || offset >= resp.Total {
			return out, nil
		}
	}
	return nil, fmt.Errorf("more than %d pages of streams", maxListResponses)
}

// DeleteStream removes a stream and its consumers, or returns an error
// wrapping keeper.ErrNoStream when it does not exist.
func (a *Adapter) DeleteStream(ctx context.Context, name string) error {
	// A removal must not meet a restore's start (see restoresatonce.go).
	release, err := a.holdStarts(ctx)
	if err != nil {
		return fmt.Errorf("jsbus: stream %s was not deleted: %w", name, err)
	}
	defer release()
	return a.deleteStream(ctx, name)
}

// deleteStream is DeleteStream for a caller that holds the gate of
// restores' starts.
func (a *Adapter) deleteStream(ctx context.Context, name string) error {
	if !validName(name) {
		return fmt.Errorf("jsbus: %q is not a stream name, so nothing was deleted: %w", name, keeper.ErrNoStream)
	}
	tries := 0
	err := a.retry(ctx, "delete stream "+name, func(ctx context.Context) error {
		tries++
		err := a.js.DeleteStream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) && tries > 1 {
			err = nil // an earlier try whose answer was lost deleted it
		}
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return noStream(name, err)
	}
	if err != nil {
		return busErr(fmt.Errorf("jsbus: delete stream %s: %w (it may or may not still exist)", name, err))
	}
	a.log.Info("deleted stream", "stream", name)
	return nil
}

// Snapshot streams the server's snapshot of the stream, consumers included,
// into data and meta (see snapshotInto), and closes both. A snapshot during
// which the server sends nothing for the stall timeout, or whose connection
// drops, is abandoned with an error.
func (a *Adapter) Snapshot(ctx context.Context, stream string, data, meta io.WriteCloser) error {
	closeBoth := func() {
		data.Close()
		meta.Close()
	}
	if !validName(stream) {
		closeBoth()
		return fmt.Errorf("jsbus: %q is not a stream name, so no snapshot was taken: %w", stream, keeper.ErrNoStream)
	}
	// The window is taken from the connection's budget before the server is
	// asked, so a snapshot waiting for it neither stalls nor holds the
	// server's flow control.
	window, err := a.flights.take(ctx, a.flights.share(snapshotWindow))
	if err != nil {
		closeBoth()
		return fmt.Errorf("jsbus: no snapshot of stream %s was taken: %w", stream, err)
	}
	defer a.flights.give(window)
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &watchedWriter{w: data}
	mw := &watchedWriter{w: meta}
	w.touch()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { a.watch(sctx, cancel, w, stop) })
	start := time.Now()
	err = a.snapshotInto(sctx, stream, int(window), w, mw)
	close(stop)
	wg.Wait()
	w.Close() // snapshotInto has closed both; these make sure, and keep the errors
	mw.Close()
	if err == nil {
		if cerr := cmp.Or(w.closeError(), mw.closeError()); cerr != nil {
			return fmt.Errorf("jsbus: closing the snapshot of stream %s failed, so it is not whole: %w", stream, cerr)
		}
	}
	if err != nil {
		if cause := context.Cause(sctx); cause != nil && ctx.Err() == nil && (errors.Is(cause, errStalled) || errors.Is(cause, errDisconnected)) {
			err = cause
			if errors.Is(cause, errDisconnected) {
				err = fmt.Errorf("%w: %w", cause, keeper.ErrNoBus) // a snapshot begun again may pass
			}
		}
		if isCode(err, codeStreamNotFound) {
			return noStream(stream, err)
		}
		if errors.Is(err, errServerEnded) || errors.Is(err, errStalled) {
			// The server ended it part way (a replica or a consumer's leader
			// went away with a dying server), or stopped sending (the
			// stream's leader that answered the request died): a snapshot
			// begun again may pass.
			err = fmt.Errorf("%w: %w", err, keeper.ErrNoBus)
		}
		return busErr(fmt.Errorf("jsbus: snapshot of stream %s failed after %d bytes, so it is not whole: %w", stream, w.n.Load(), err))
	}
	a.log.Debug("snapshot taken", "stream", stream, "bytes", w.n.Load(), "took", time.Since(start))
	return nil
}

var (
	errStalled      = errors.New("the server sent no snapshot data for too long")
	errDisconnected = errors.New("the connection to the server dropped, so chunks may be lost")
	errServerEnded  = errors.New("the server ended the snapshot")
)

// connMark is the connection's reconnect count now, for connLost.
func (a *Adapter) connMark() uint64 {
	if a.nc == nil {
		return 0
	}
	return a.nc.Stats().Reconnects
}

// connLost reports whether the connection is down or has reconnected since
// mark was taken: what was in flight on it then may be gone.
func (a *Adapter) connLost(mark uint64) bool {
	return a.nc != nil && (a.nc.Status() != nats.CONNECTED || a.nc.Stats().Reconnects != mark)
}

// watchConn cancels ctx with errDisconnected once the connection is down or
// has reconnected since the watch began.
func (a *Adapter) watchConn(ctx context.Context, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	if a.nc == nil {
		return
	}
	a.watchEvery(ctx, cancel, stop, 250*time.Millisecond, nil)
}

// watch cancels ctx with errStalled when w has not been written to for the
// stall timeout while no write is in progress, or with errDisconnected as
// watchConn does.
func (a *Adapter) watch(ctx context.Context, cancel context.CancelCauseFunc, w *watchedWriter, stop <-chan struct{}) {
	a.watchEvery(ctx, cancel, stop, min(a.cfg.stall/4, 250*time.Millisecond), func() error {
		limit := a.cfg.stall
		if w.answered.Load() && w.n.Load() == 0 {
			limit = min(limit, firstDataStall)
		}
		if w.busy.Load() == 0 && time.Since(time.Unix(0, w.last.Load())) > limit {
			return fmt.Errorf("%w (%s)", errStalled, limit)
		}
		return nil
	})
}

// firstDataStall bounds the wait for a snapshot's first data once the
// server has answered the request: the stream's leader begins sending at
// once (the keeper does not ask it to check every message first). None for
// this long means the leader that answered has died, as seen on a cluster
// whose server was killed just then; the stall timeout proper (a server
// slow to write more of a big stream) applies once data flows.
const firstDataStall = 15 * time.Second

// watchEvery checks every period, until stop is closed or ctx ends, whether
// the connection was lost since it began (what was in flight on it then is
// gone, and the server does not send it again), and then check, when set;
// it cancels ctx with the first cause found.
func (a *Adapter) watchEvery(ctx context.Context, cancel context.CancelCauseFunc, stop <-chan struct{}, period time.Duration, check func() error) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	mark := a.connMark()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if a.connLost(mark) {
				cancel(errDisconnected)
				return
			}
			if check != nil {
				if err := check(); err != nil {
					cancel(err)
					return
				}
			}
		}
	}
}

// watchedWriter counts what goes through it and when. After its first write
// error or its Close it swallows further writes, so nothing is ever written
// into a closed or failed writer.
type watchedWriter struct {
	w    io.WriteCloser
	n    atomic.Int64
	last atomic.Int64 // unix nanos of the last write's end
	busy atomic.Int32
	// answered is set once the server answered the snapshot request: from
	// then on its first data is waited for firstDataStall at most.
	answered atomic.Bool

	mu       sync.Mutex
	closed   bool
	failed   bool
	closeErr error
}

func (w *watchedWriter) touch() { w.last.Store(time.Now().UnixNano()) }

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.busy.Add(1)
	defer w.busy.Add(-1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.failed {
		return len(p), nil
	}
	n, err := w.w.Write(p)
	w.n.Add(int64(n))
	w.touch()
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.failed = true
	}
	return n, err
}

func (w *watchedWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.closeErr
	}
	w.closed = true
	w.closeErr = w.w.Close()
	return w.closeErr
}

// closeErr is the error of the first Close, which jsm does not look at.
func (w *watchedWriter) closeError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closeErr
}

// backupMeta is the part of backup.json the adapter checks.
type backupMeta struct {
	Config struct {
		Name     string `json:"name"`
		Replicas int    `json:"num_replicas"`
	} `json:"config"`
	State struct {
		Msgs     uint64 `json:"messages"`
		FirstSeq uint64 `json:"first_seq"`
		LastSeq  uint64 `json:"last_seq"`
		// Consumers is how many consumers the snapshot carries.
		Consumers int `json:"consumer_count"`
	} `json:"state"`
}

// Restore re-creates the stream from data and meta with the configuration
// the archive holds (replicas and placement included), sending chunks as
// large as the connection's max payload (the start of a snapshot with
// consumers re-cut into small blocks and sent in small chunks: see
// paceStart), with the same protocol as jsm.go's
// RestoreSnapshotFromBuffer (see restore.go for why it is not used). The stream must not exist: an
// existing one gives an error wrapping keeper.ErrConflict and is untouched.
func (a *Adapter) Restore(ctx context.Context, stream string, data, meta io.Reader) error {
	if !validName(stream) {
		return fmt.Errorf("jsbus: %q is not a stream name, so nothing was restored: %w", stream, keeper.ErrBadRequest)
	}
	mj, err := io.ReadAll(io.LimitReader(meta, maxMetaSize+1))
	if err != nil {
		return fmt.Errorf("jsbus: read backup.json of stream %s, so nothing was restored: %w", stream, err)
	}
	if len(mj) > maxMetaSize {
		return fmt.Errorf("jsbus: backup.json of stream %s is over %d bytes, so nothing was restored: %w", stream, maxMetaSize, keeper.ErrBadRequest)
	}
	var bm backupMeta
	if err := json.Unmarshal(mj, &bm); err != nil {
		return fmt.Errorf("jsbus: backup.json of stream %s is not valid JSON, so nothing was restored: %w: %w", stream, keeper.ErrBadRequest, err)
	}
	if bm.Config.Name != stream {
		return fmt.Errorf("jsbus: backup.json is of stream %q, not %q, so nothing was restored: %w", bm.Config.Name, stream, keeper.ErrBadRequest)
	}
	chunk := int(min(a.nc.MaxPayload(), maxChunk))
	start := time.Now()
	// A restore is fed over this connection: chunks in flight when it drops
	// are lost, so a restore whose connection drops is abandoned.
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { a.watchConn(rctx, cancel, stop) })
	var src io.Reader = &fullReader{r: data}
	if lead := paceLead(bm.State.Consumers); lead > 0 {
		paced, head, err := paceStart(data, lead)
		if err != nil {
			a.log.Warn("the start of a stream's snapshot could not be cut into small blocks; it is sent as it is",
				"stream", stream, "consumers", bm.State.Consumers, "err", err)
		}
		src = &pacedReader{r: &fullReader{r: paced}, small: paceChunk, lead: head}
	}
	st, err := a.restore(rctx, stream, mj, src, chunk)
	close(stop)
	wg.Wait()
	if cause := context.Cause(rctx); err != nil && ctx.Err() == nil && errors.Is(cause, errDisconnected) {
		err = fmt.Errorf("%w: %w", cause, err)
	}
	if err != nil {
		if isCode(err, codeStreamExistRestore) || isCode(err, codeStreamNameExist) {
			return fmt.Errorf("jsbus: stream %s already exists, so it was not restored over: %w: %w", stream, keeper.ErrConflict, err)
		}
		if transient(err) || errors.Is(err, errDisconnected) {
			err = fmt.Errorf("%w: %w", err, keeper.ErrNoBus) // a restore begun again may pass
		}
		if staleFiles(err) {
			err = fmt.Errorf("%w: %w", err, keeper.ErrStaleStream) // removed again later, it may pass
		}
		return busErr(fmt.Errorf("jsbus: restore of stream %s failed; a part of it may be on the bus: %w", stream, err))
	}
	if st.LastSeq != bm.State.LastSeq {
		return fmt.Errorf("jsbus: restored stream %s ends at sequence %d but its archive says %d; the restored stream is on the bus: %w",
			stream, st.LastSeq, bm.State.LastSeq, keeper.ErrFailed)
	}
	if err := a.awaitReplicated(ctx, stream, bm.Config.Replicas, *st); err != nil {
		return err
	}
	if err := a.awaitConsumers(ctx, stream, bm.State.Consumers, bm.Config.Replicas, st.LastSeq); err != nil {
		return err
	}
	if st.Msgs != bm.State.Msgs {
		a.log.Info("restored stream holds a different number of messages than its snapshot's state says (a point at a cut leaves out those stored after it; limits such as max age may have removed some)",
			"stream", stream, "restored", st.Msgs, "archived", bm.State.Msgs)
	}
	a.log.Info("restored stream", "stream", stream, "replicas", bm.Config.Replicas, "took", time.Since(start))
	return nil
}

// consumersPause is the pause between two looks for a restored stream's
// consumers.
const consumersPause = 100 * time.Millisecond

// awaitConsumers waits until the restored stream has at least want
// consumers, each answering with a leader. On a cluster the server answers
// the restore before the consumers its snapshot carries are on the bus: the
// stream's new leader proposes them to the meta group only after it has sent
// that reply, and each then elects its own leader. Until then the stream is
// listed without them, or they do not answer, so a position read or a dump
// right after the restore would miss them. On a single server they are there
// already. The wait is bounded by the adapter's timeout.
func (a *Adapter) awaitConsumers(ctx context.Context, stream string, want, replicas int, lastSeq uint64) error {
	if want <= 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, a.cfg.timeout)
	defer cancel()
	got, looks := 0, 0
	var missing []string
	var lerr error
	all := false
	pc := &pendingCheck{stream: stream, lastSeq: lastSeq}
	for {
		looks++
		var cs []rawConsumer
		cs, missing, lerr = a.consumers(wctx, stream)
		all = lerr == nil && len(missing) == 0 && len(cs) >= want
		if lerr == nil {
			got = len(cs)
		}
		if all && (replicas <= 1 || pc.settled(wctx, a, cs)) {
			if looks > 1 {
				a.log.Debug("restored consumers are on the bus", "stream", stream, "consumers", got, "looks", looks)
			}
			return nil
		}
		select {
		case <-wctx.Done():
			if all && ctx.Err() == nil {
				a.log.Warn("restored consumers are on the bus, but some count no message pending though some wait for them; their messages are delivered all the same",
					"stream", stream, "consumers", pc.names(), "waited", a.cfg.timeout)
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("jsbus: restored stream %s, but stopped waiting for its consumers (%d of %d on the bus); the restored stream is on the bus: %w",
					stream, got, want, ctx.Err())
			}
			return fmt.Errorf("jsbus: restored stream %s, but only %d of the %d consumers its archive holds answered with a leader in %s (not answering: %v, last error: %v); the restored stream is on the bus: %w",
				stream, got, want, a.cfg.timeout, missing, lerr, keeper.ErrFailed)
		case <-time.After(consumersPause):
		}
	}
}

// fullReader fills every read whole until the end, so that restore chunks
// are as large as the connection allows, and never returns data together
// with io.EOF (readChunk keeps such data too, whatever the reader).
type fullReader struct {
	r    io.Reader
	done bool
}

func (f *fullReader) Read(p []byte) (int, error) {
	if f.done {
		return 0, io.EOF
	}
	n, err := io.ReadFull(f.r, p)
	switch {
	case errors.Is(err, io.EOF):
		f.done = true
		return 0, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		f.done = true
		return n, nil
	}
	return n, err
}

// staleFiles reports a restore refused because the new stream's store
// already held messages. nats-server (2.15.3, fileStore.Delete) removes a
// deleted stream by renaming its directory to .<name> and deleting that in
// the background; a second delete of the same name before that ends cannot
// rename, leaves the message blocks in place and still answers success, and
// a restore into the name then finds them ("expected sequence does not
// match store"). Once the background removal is done, deleting the
// half-restored stream removes them too.
func staleFiles(err error) bool {
	return isCode(err, codeStreamRestore) && strings.Contains(err.Error(), "expected sequence does not match store")
}
