package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// The points shape: kept data pts/d00001, pts/d00002, … of module pts, each
// a KV bucket of pointKeys keys, each with one point. The tiers are reached
// one after the other: for each, the kept data missing are made, and each is
// snapshotted once (timed); the last few of those are paired with `nats
// backup stream` of the same bucket. Then, with every point in place,
// list-kept is timed and its reply measured, the keeper's memory read, and
// the keeper restarted to time its start-up (the index rebuild and the
// recovery scan, up to its first answer).
const (
	pointsModule = "pts"
	pointKeys    = 10
	listRounds   = 5
	startRounds  = 3
	maxTierPairs = 20
)

// PointsTier is the figures of one tier of the points shape.
type PointsTier struct {
	Points       int      // kept data on the bus, each with one point
	Snapshot     []Sample // every snapshot-kept taken to reach this tier
	Pairs        Pairs    // the last of those, each against nats backup stream of its bucket
	ListModule   []Sample // list-kept {"module":"pts"}
	ListAll      []Sample // list-kept {}
	ModuleBytes  int      // bytes of the list-kept replies
	AllBytes     int      //
	ListErr      string   // why a list-kept failed, if one did
	RSS, PeakRSS int64    // of the keeper after the tier's snapshots and lists
	Startup      []Sample // restarts of the keeper, to its first answer
	StartupRSS   int64    // VmRSS right after the last restart's first answer
}

func pointsLocal(i int) string { return fmt.Sprintf("d%05d", i) }

// shapePoints runs every tier of cfg.Points.
func (r *run) shapePoints(ctx context.Context, sr *ShapeResult) error {
	js, err := r.shapeJS()
	if err != nil {
		return err
	}
	pay := randomPayload()
	sr.Data = fmt.Sprintf("kept data `%s/d00001`, `%s/d00002`, … each a KV bucket of %d keys of %d random bytes, with one point each; tiers %v reached one after the other on one server and keeper",
		pointsModule, pointsModule, pointKeys, kvValueSize, r.cfg.Points)
	have := 0
	for _, n := range r.cfg.Points {
		tier := PointsTier{Points: n}
		r.cfg.Log.Info("points tier", "points", n)
		for i := have + 1; i <= n; i++ {
			if err := r.fillKV(ctx, js, pointsModule+"_"+pointsLocal(i), pointKeys, kvValueSize, pay); err != nil {
				return err
			}
		}
		pairFrom := n - min(maxTierPairs, n-have) + 1
		for i := have + 1; i <= n; i++ {
			k := kept{module: pointsModule, local: pointsLocal(i), wait: 5 * time.Minute}
			s, _, err := r.keeperVerb(ctx, "points-keeper-snapshot", k, r.file().client.SnapshotKept)
			if err != nil {
				sr.Points = append(sr.Points, tier)
				return fmt.Errorf("snapshot-kept of %s/%s at %d kept data: %w", k.module, k.local, i, err)
			}
			tier.Snapshot = append(tier.Snapshot, s)
			if i >= pairFrom {
				ns, err := r.cliBackup(ctx, "points-nats-backup", []string{"KV_" + pointsModule + "_" + k.local})
				if err != nil {
					return err
				}
				tier.Pairs.Keeper, tier.Pairs.Nats = append(tier.Pairs.Keeper, s), append(tier.Pairs.Nats, ns)
			}
			if i%500 == 0 {
				r.cfg.Log.Info("points", "taken", i, "of", n)
			}
		}
		have = n
		if err := r.tierLists(ctx, &tier); err != nil {
			sr.Points = append(sr.Points, tier)
			return err
		}
		tier.RSS, _ = statusBytes(r.file().proc.pid(), "VmRSS")
		for _, x := range slices.Concat(tier.Snapshot, tier.ListModule, tier.ListAll) {
			tier.PeakRSS = max(tier.PeakRSS, x.PeakRSS)
		}
		for range startRounds {
			s, err := r.restartKeeper(ctx)
			if err != nil {
				sr.Points = append(sr.Points, tier)
				return err
			}
			tier.Startup = append(tier.Startup, s)
		}
		tier.StartupRSS, _ = statusBytes(r.file().proc.pid(), "VmRSS")
		sr.Points = append(sr.Points, tier)
	}
	return nil
}

// tierLists times list-kept of the one module and of everything, with the
// bytes of their replies. A list-kept that fails is recorded, not fatal: a
// reply past the max payload is one of the things measured.
func (r *run) tierLists(ctx context.Context, tier *PointsTier) error {
	for _, q := range []struct {
		req   keeper.Request
		into  *[]Sample
		bytes *int
	}{
		{keeperRequest(pointsModule, "", 0, ""), &tier.ListModule, &tier.ModuleBytes},
		{keeperRequest("", "", 0, ""), &tier.ListAll, &tier.AllBytes},
	} {
		for range listRounds {
			var n int
			s, _, err := r.keeperOp(ctx, r.file(), "points-list-kept", func(ctx context.Context) (*keeper.Reply, error) {
				var err error
				n, err = r.rawVerb(ctx, keeper.VerbList, q.req, time.Minute)
				return &keeper.Reply{}, err
			})
			if err != nil {
				// Once is enough: a reply past the max payload fails
				// every time, each after a minute's wait.
				tier.ListErr = err.Error()
				break
			}
			*q.into, *q.bytes = append(*q.into, s), n
		}
	}
	return nil
}

// rawVerb sends a verb to the file keeper and returns the bytes of its
// reply, or the error it answered.
func (r *run) rawVerb(ctx context.Context, verb string, q keeper.Request, wait time.Duration) (int, error) {
	body, err := json.Marshal(q)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := r.nc.RequestWithContext(rctx, r.file().client.Prefix()+"."+verb, body)
	if err != nil {
		return 0, fmt.Errorf("%s: no reply within %s: %w", verb, wait, err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return len(m.Data), fmt.Errorf("%s answered %s: %s", verb, code, m.Header.Get(micro.ErrorHeader))
	}
	return len(m.Data), nil
}

// restartKeeper stops the file keeper and starts it again with the same
// command, and times its start-up: from the start of the process to its
// first answer to a list-kept of a module with nothing kept.
func (r *run) restartKeeper(ctx context.Context) (Sample, error) {
	k := r.file()
	if err := k.proc.stop(time.Minute); err != nil {
		r.cfg.Log.Debug("stopping the keeper to restart it", "err", err)
	}
	old := k.proc.cmd
	settle()
	start := time.Now()
	p, err := startProc(k.proc.name, old.Env, old.Path, old.Args[1:]...)
	if err != nil {
		return Sample{}, err
	}
	k.proc = p
	probe := keeperRequest("nobody", "", 0, "")
	for deadline := start.Add(10 * time.Minute); ; {
		_, err := r.rawVerb(ctx, keeper.VerbList, probe, 2*time.Second)
		if err == nil {
			break
		}
		if !p.running() || time.Now().After(deadline) || ctx.Err() != nil {
			return Sample{}, fmt.Errorf("the restarted keeper did not answer list-kept (%v); its log:\n%s", err, p.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w := time.Since(start)
	cpu, err := procCPU(p.pid())
	if err != nil {
		return Sample{}, err
	}
	peak, _ := peakRSS(p.pid())
	return Sample{Wall: w, ClientCPU: cpu.all, ClientSys: cpu.sys, PeakRSS: peak}, nil
}
