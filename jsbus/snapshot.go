package jsbus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/jsm.go/api"
	"github.com/nats-io/nats.go"
)

// Snapshot chunk and window sizes asked of the server: its defaults, which
// measured fastest here (see BENCHMARKS.md). The window bounds what the
// adapter holds in memory and what the server queues for its connection:
// the server sends no more than a window of chunks it has not had
// acknowledged. Every snapshot takes its window from the connection's
// in-flight budget (WithInFlight), so that together they stay under the
// server's max_pending; a small budget shrinks the window to a quarter of it.
const (
	snapshotChunk  = 128 << 10
	snapshotWindow = 8 << 20
)

// snapshotInto runs the JetStream snapshot protocol, consumers included:
// a snapshot request naming a subject of the adapter's, then the server's
// chunks to it, each acknowledged, then an empty message whose status says
// whether the snapshot is whole. backup.json ({"config":…,"state":…}, as
// jsm.go and the nats CLI write it) goes to meta at the end. Both writers
// are closed.
//
// The server sends at most window bytes before they are acknowledged.
//
// jsm.go's SnapshotToBuffer does the same, but acknowledges each chunk as it
// arrives, before writing it, with the subscription's pending limits off: when
// the disk is slower than the server, the chunks pile up in memory without
// bound (a whole stream, at worst). Here a chunk is acknowledged only once it
// is written, so the server's window bounds memory, and a disk that stalls
// for the server's flow-control timeout fails the snapshot instead.
func (a *Adapter) snapshotInto(ctx context.Context, stream string, window int, data, meta io.WriteCloser) (err error) {
	defer func() {
		cerr := data.Close()
		if merr := meta.Close(); cerr == nil {
			cerr = merr
		}
		if err == nil && cerr != nil {
			err = fmt.Errorf("closing the snapshot failed: %w", cerr)
		}
	}()
	var (
		sub  *nats.Subscription
		resp api.JSApiStreamSnapshotResponse
	)
	// A try whose answer was lost may have started a snapshot all the same:
	// each try has an inbox of its own, so chunks of two never mix.
	err = a.retry(ctx, "start the snapshot of "+stream, func(ctx context.Context) (err error) {
		sub, err = a.startSnapshot(ctx, stream, window, &resp)
		return err
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if w, ok := data.(*watchedWriter); ok {
		w.answered.Store(true) // the wait for the first data begins now
		w.touch()
	}

	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return err
		}
		if len(m.Data) == 0 {
			if err := snapshotStatus(m); err != nil {
				return err
			}
			break
		}
		if _, err := data.Write(m.Data); err != nil {
			return err
		}
		if m.Reply != "" {
			if err := m.Respond(nil); err != nil {
				return busErr(fmt.Errorf("acknowledge a snapshot chunk: %w", err))
			}
		}
	}

	mj, err := json.MarshalIndent(map[string]any{"config": resp.Config, "state": resp.State}, "", "  ")
	if err != nil {
		return err
	}
	_, err = meta.Write(mj)
	return err
}

// startSnapshot subscribes to a new inbox and asks the server to send the
// stream's snapshot there: one try.
func (a *Adapter) startSnapshot(ctx context.Context, stream string, window int, resp *api.JSApiStreamSnapshotResponse) (*nats.Subscription, error) {
	inbox := a.nc.NewInbox()
	sub, err := a.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, busErr(fmt.Errorf("subscribe for the snapshot's chunks: %w", err))
	}
	// Far above what the window lets the server send unacknowledged.
	if err := sub.SetPendingLimits(4*window/snapshotChunk+16, 4*window); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	req := api.JSApiStreamSnapshotRequest{DeliverSubject: inbox, ChunkSize: min(snapshotChunk, window), WindowSize: window}
	if err := a.requestOnce(ctx, "$JS.API.STREAM.SNAPSHOT."+stream, req, resp); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	return sub, nil
}

// snapshotStatus is the error the server's last, empty message carries: its
// status is 204 when the snapshot is whole.
func snapshotStatus(m *nats.Msg) error {
	status := m.Header.Get("Status")
	if status == "" || strings.HasPrefix(status, "204") {
		return nil
	}
	if d := m.Header.Get("Description"); d != "" {
		status += " " + d
	}
	return fmt.Errorf("%w with %s", errServerEnded, status)
}
