package jsbus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// replicatedInfo is the part of a stream info reply awaitReplicated reads.
type replicatedInfo struct {
	State struct {
		LastSeq uint64 `json:"last_seq"`
	} `json:"state"`
	Cluster *streamCluster `json:"cluster"`
}

// streamCluster is a stream info reply's cluster: its leader and the other
// replicas as the leader sees them.
type streamCluster struct {
	Leader   string `json:"leader"`
	Replicas []struct {
		Current bool          `json:"current"`
		Offline bool          `json:"offline"`
		Active  time.Duration `json:"active"` // since the leader last heard from it
	} `json:"replicas"`
}

func (c *streamCluster) leader() string {
	if c == nil || c.Leader == "" {
		return "a server that names no leader"
	}
	return "server " + c.Leader
}

// holders is how many of the stream's peers hold its restored data: the
// leader, and every replica online and current that the leader heard from
// at least replicatedSettle after the restore ended, elapsed ago.
//
// A replica's current alone does not say it: right after the restore the
// leader has not yet sent the restored state, and its replicas are current
// with what it sent before. They store that state, answer, and only then
// ask the leader for the messages, and the leader reports a replica it is
// still sending messages to as not current (nats-server 2.15.3,
// checkClusterInfo). A replica heard from well after the restore ended has
// stored the state and asked for the messages; current then means it has
// them all.
func (r *replicatedInfo) holders(elapsed time.Duration) int {
	if r.Cluster == nil || r.Cluster.Leader == "" {
		return 0
	}
	n := 1
	for _, p := range r.Cluster.Replicas {
		if p.Current && !p.Offline && elapsed-p.Active >= replicatedSettle {
			n++
		}
	}
	return n
}

// replicatedSettle is how long after a restore ended a replica must have
// answered its leader to count as holding the restore (see holders). An
// idle leader sends a heartbeat after a second of quiet, on a one-second
// tick (nats-server 2.15.3, runAsLeader), so it hears from every replica
// within about two seconds: that is what the wait costs.
const replicatedSettle = 500 * time.Millisecond

// replicatedPause is the pause between two looks at a restored stream's
// replicas.
const replicatedPause = 100 * time.Millisecond

// awaitReplicated waits until a majority of a restored replicated stream's
// peers hold its restored data: a leader that holds it up to want's last
// sequence, with enough replicas current.
//
// On a cluster one server takes the whole restore, answers it, and only
// then sends the stream's state to the other replicas, which fetch the
// messages from it (nats-server 2.15.3, monitorStream after
// processStreamRestore). If that server dies first, no one else holds the
// data: the others wait for it as the group's preferred leader and the
// stream answers nothing, or one of them leads a stream without the data.
// Either way the restore is lost, and it is reported as a restore the bus
// cut short (keeper.ErrNoBus), so that the executor removes the stream and
// restores it again from the point. A stream whose leader holds the data
// but whose replicas are not all current when the wait ends is taken as
// restored: nothing is lost while that leader lives, and the replicas catch
// up from it.
func (a *Adapter) awaitReplicated(ctx context.Context, stream string, replicas int, want restoreState) error {
	if replicas <= 1 {
		return nil
	}
	majority := replicas/2 + 1
	ended := time.Now()
	wctx, cancel := context.WithTimeout(ctx, a.cfg.timeout)
	defer cancel()
	var seen string
	for looks := 1; ; looks++ {
		var info replicatedInfo
		lctx, lcancel := context.WithTimeout(wctx, a.cfg.attempt)
		err := a.requestOnce(lctx, "$JS.API.STREAM.INFO."+stream, nil, &info)
		lcancel()
		held := info.holders(time.Since(ended))
		switch {
		case isCode(err, codeStreamNotFound):
			return fmt.Errorf("jsbus: restored stream %s was gone from the bus before a majority of its %d replicas held it: %w",
				stream, replicas, keeper.ErrNoBus)
		case err == nil && info.State.LastSeq < want.LastSeq:
			return fmt.Errorf("jsbus: restored stream %s is led by %s, which holds it up to sequence %d and not %d: the server that took the restore went away before the others held its data: %w",
				stream, info.Cluster.leader(), info.State.LastSeq, want.LastSeq, keeper.ErrNoBus)
		case err == nil && held >= majority:
			a.log.Debug("restored stream is held by a majority of its replicas", "stream", stream,
				"holders", held, "replicas", replicas, "looks", looks, "waited", time.Since(ended))
			return nil
		case err == nil:
			seen = fmt.Sprintf("%d of %d hold it", held, replicas)
		default:
			seen = fmt.Sprintf("no leader answered (%v)", err)
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("jsbus: restored stream %s, but stopped waiting for its replicas (%s); the restored stream is on the bus: %w", stream, seen, ctx.Err())
			}
			if err == nil {
				a.log.Warn("restored stream is held by its leader, but not yet by a majority of its replicas; going on",
					"stream", stream, "held", seen, "waited", a.cfg.timeout)
				return nil
			}
			return fmt.Errorf("jsbus: restored stream %s had no leader holding it for %s after its restore (%s): the server that took the restore went away before the others held its data: %w",
				stream, a.cfg.timeout, seen, keeper.ErrNoBus)
		case <-time.After(replicatedPause):
		}
	}
}
