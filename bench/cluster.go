package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/jsbus"
)

// The cluster comparison (Config.Cluster, issue 13): three nats-server
// processes in one JetStream cluster on 127.0.0.1, the kept data at R3, one
// keeper whose --server lists all three, and the big comparisons of the
// single-server run, with the three servers' CPU summed.

const (
	clusterSize = 3
	clusterName = "bench"
	probeStream = "bench_probe"
	// clusterWait bounds each wait for the cluster: its first R3 stream,
	// and the replicas of a restored stream becoming current.
	clusterWait = 3 * time.Minute
)

// ClusterFacts is what the cluster run saw of the cluster itself.
type ClusterFacts struct {
	Formed        time.Duration // from the servers' start until the cluster took an R3 stream
	IndexReplicas int           // of the keeper's index bucket (KV_kept), as the keeper made it
	ActsReplicas  int           // of its acts stream (KEEPER_ACTS)
	Restores      []RestoreCheck
	Commands      []string // the servers' command lines (ports and dirs as names)
}

// RestoreCheck is what one restore gave back on the cluster: the replicas
// of each stream, and how long after the restore's reply every replica of
// both streams was current (waited for, not timed, before the next
// operation).
type RestoreCheck struct {
	By       string         // restoreByKeeper, restoreByNats or restoreLive
	Replicas map[string]int // stream → replicas in its config after the restore
	CatchUp  time.Duration
}

// Who restored, in RestoreCheck.By.
const (
	restoreByKeeper = "keeper `restore-kept` into an absent kept data"
	restoreByNats   = "`nats backup restore stream`"
	restoreLive     = "keeper `restore-kept` with the kept data live"
)

// startCluster starts the three servers as one JetStream cluster, connects
// to them, and waits until the cluster takes an R3 stream (its meta group
// has a leader).
func (r *run) startCluster(ctx context.Context, serverBin string) error {
	ports, err := freePorts(2 * clusterSize)
	if err != nil {
		return err
	}
	client, routes := ports[:clusterSize], ports[clusterSize:]
	var urls []string
	start := time.Now()
	for i := range clusterSize {
		name := "c" + strconv.Itoa(i+1)
		var peers, shown []string
		for j, p := range routes {
			if j != i {
				peers = append(peers, "nats://127.0.0.1:"+strconv.Itoa(p))
				shown = append(shown, "nats://127.0.0.1:ROUTE"+strconv.Itoa(j+1))
			}
		}
		p, err := startProc("nats-server "+name, r.env, serverBin, "-js", "-sd", filepath.Join(r.work, "store", name),
			"-a", "127.0.0.1", "-p", strconv.Itoa(client[i]), "-n", name, "--cluster_name", clusterName,
			"--cluster", "nats://127.0.0.1:"+strconv.Itoa(routes[i]), "--routes", strings.Join(peers, ","))
		if err != nil {
			return err
		}
		if i == 0 {
			r.server = p
		} else {
			r.peers = append(r.peers, p)
		}
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(client[i]))
		r.res.Cluster.Commands = append(r.res.Cluster.Commands, fmt.Sprintf(
			"nats-server -js -sd DIR/store/%s -a 127.0.0.1 -p PORT%d -n %s --cluster_name %s --cluster nats://127.0.0.1:ROUTE%d --routes %s",
			name, i+1, name, clusterName, i+1, strings.Join(shown, ",")))
	}
	r.url = strings.Join(urls, ",")
	if r.nc, err = connectRetry(ctx, r.url, r.server); err != nil {
		return err
	}
	if err := r.waitMetaLeader(ctx); err != nil {
		return err
	}
	r.res.Cluster.Formed = time.Since(start)
	r.cfg.Log.Info("the cluster takes R3 streams", "after", r.res.Cluster.Formed)
	return nil
}

// freePorts is n distinct free ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	for try := 0; len(ports) < n; try++ {
		if try == 10*n {
			return nil, fmt.Errorf("found only %d distinct free ports of %d, so no cluster was started", len(ports), n)
		}
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// waitMetaLeader creates and deletes an R3 probe stream: the first R3 create
// fails while the new cluster elects its meta leader.
func (r *run) waitMetaLeader(ctx context.Context) error {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(clusterWait)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.CreateStream(pctx, jetstream.StreamConfig{Name: probeStream, Subjects: []string{"bench.probe"}, Replicas: clusterSize})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the cluster did not take an R3 stream within %s (%v), so nothing was measured; the first server's log:\n%s", clusterWait, err, r.server.tail())
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := js.DeleteStream(ctx, probeStream); err != nil {
		return fmt.Errorf("delete the probe stream %s: %w", probeStream, err)
	}
	return nil
}

// checkKeeperReplicas records the replicas the keeper gave its own index
// and acts stream with no --replicas: 3 on a cluster of 3.
func (r *run) checkKeeperReplicas(ctx context.Context) error {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return err
	}
	for name, dst := range map[string]*int{"KV_kept": &r.res.Cluster.IndexReplicas, jsbus.DefaultActsStream: &r.res.Cluster.ActsReplicas} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("look up the keeper's stream %s on the cluster: %w", name, err)
		}
		*dst = s.CachedInfo().Config.Replicas
	}
	return nil
}

// measureCluster runs the big comparisons on the cluster.
func (r *run) measureCluster(ctx context.Context) error {
	r.res.Commands = append(r.bigCommands(),
		"after every restore (keeper's or CLI's), not timed: read each stream's replicas, then wait until every replica of both streams is current before the next operation (reported as catch-up)")
	return r.measureBig(ctx)
}

// checkReplicas records the replicas of the restored streams and waits
// until every replica of each is current, so the next operation does not
// pay for this restore's catch-up. By says who restored.
func (r *run) checkReplicas(ctx context.Context, js jetstream.JetStream, by string) error {
	done := time.Now()
	rc := RestoreCheck{By: by, Replicas: map[string]int{}}
	deadline := done.Add(clusterWait)
	for _, name := range []string{dataStream, kvStream} {
		for {
			s, err := js.Stream(ctx, name)
			if err == nil {
				rc.Replicas[name] = s.CachedInfo().Config.Replicas
				if replicasCurrent(s.CachedInfo()) {
					break
				}
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("the replicas of stream %s were not all current within %s of its restore (%v)", name, clusterWait, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	rc.CatchUp = time.Since(done)
	r.res.Cluster.Restores = append(r.res.Cluster.Restores, rc)
	return nil
}

// replicasCurrent reports whether the stream has a leader and every one of
// its other replicas is online and current.
func replicasCurrent(info *jetstream.StreamInfo) bool {
	c := info.Cluster
	if c == nil || c.Leader == "" || len(c.Replicas) != info.Config.Replicas-1 {
		return false
	}
	for _, p := range c.Replicas {
		if !p.Current || p.Offline {
			return false
		}
	}
	return true
}
