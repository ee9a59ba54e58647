package jsbus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Restores at once on one server.
//
// nats-server 2.15.3 begins a restore (RestoreStreamV2, once it has read
// the snapshot's state) by adding up the account's reserved bytes over its
// map of streams without the account's lock (jsAccount.tieredReservation),
// then adds the new stream to that map. A stream added or removed in the
// account at that moment can end the server's process with "concurrent map
// iteration and map write" (TestManyRestoresAtOnceOnAServerOfItsOwn does it
// in under a second without this gate). A cluster counts under the
// JetStream lock (and may not list a stream before its restore is done), so
// there the gate is not taken.
//
// So the adapter takes these moments one at a time: a restore holds the
// gate from its request until the server lists its stream (the stream is in
// the map, so the count is behind it) or the restore has ended, and a
// removal holds it over its request. The rest of a restore, its data, runs
// beside the others. Streams that other clients create or remove at such a
// moment meet the same server bug; the keeper cannot prevent that.

// addedPoll bounds the pause between two looks for a restored stream while
// its restore holds the gate; the first look comes after addedFirstPoll.
const (
	addedFirstPoll = 2 * time.Millisecond
	addedPoll      = 50 * time.Millisecond
)

// holdStarts takes the gate on a server that is not part of a cluster and
// returns its release, safe to call more than once; or ctx's error when
// ctx ends first.
func (a *Adapter) holdStarts(ctx context.Context) (func(), error) {
	if a.nc.ConnectedClusterName() != "" {
		return func() {}, nil
	}
	select {
	case a.starts <- struct{}{}:
		return sync.OnceFunc(func() { <-a.starts }), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waited for another restore to begin on the server: %w", ctx.Err())
	}
}

// releaseOnceAdded calls release once the server answers for stream (its
// restore has added it), or when done is closed or ctx ends. Its looks go
// over the adapter's own connection: a restore on a lane of its own does
// not hold them behind its chunks (the first restore in flight sends its
// chunks over that connection too, so its looks wait their turn between
// chunks).
func (a *Adapter) releaseOnceAdded(ctx context.Context, stream string, release func(), done <-chan struct{}) {
	defer release()
	pause := addedFirstPoll
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		var info struct {
			Config struct {
				Name string `json:"name"`
			} `json:"config"`
		}
		err := a.requestOnce(ctx, "$JS.API.STREAM.INFO."+stream, nil, &info)
		if err == nil && info.Config.Name == stream {
			return
		}
		if err != nil && !isCode(err, codeStreamNotFound) {
			// An answer that is neither the stream nor "not found"
			// says nothing of the map: the gate stays held until the
			// restore ends.
			a.log.Debug("a restore's stream could not be looked up while it began", "stream", stream, "err", err)
			<-done
			return
		}
		pause = min(2*pause, addedPoll)
	}
}

// lane is the connection one restore's chunks go over. nats-server takes a
// restore's chunks in the read loop of the connection they arrive on and
// holds that loop until its restore has taken each one in
// (processStreamRestore writes it into a pipe), so the chunks of two
// restores on one connection take turns: on a connection of its own each
// restore is fed while the other works. The first restore in flight uses
// the adapter's connection; each one beside it dials a lane with the same
// options (server, credentials, TLS), closed when the restore ends, and
// falls back to the adapter's connection when that fails.
func (a *Adapter) lane(stream string) (*nats.Conn, func()) {
	if a.restoring.Add(1) == 1 {
		return a.nc, func() { a.restoring.Add(-1) }
	}
	opts := a.nc.Opts
	opts.Name = opts.Name + " (restore lane)"
	opts.AllowReconnect = false // a lane that drops fails its restore, which is begun again
	opts.DisconnectedErrCB, opts.DisconnectedCB, opts.ReconnectedCB, opts.ClosedCB = nil, nil, nil, nil
	if url := a.nc.ConnectedUrl(); url != "" {
		// The same server as the adapter's connection, where it can be
		// named so: the restore's chunks then take the path they took
		// on the adapter's connection.
		opts.Servers = append([]string{url}, opts.Servers...)
		opts.NoRandomize = true
	}
	nc, err := opts.Connect()
	if err != nil {
		a.log.Warn("a connection of its own for a restore beside another could not be made; its chunks go over the keeper's connection",
			"stream", stream, "err", err)
		return a.nc, func() { a.restoring.Add(-1) }
	}
	return nc, func() {
		nc.Close()
		a.restoring.Add(-1)
	}
}
