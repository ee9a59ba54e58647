package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// kept is one kept data a shape measures: its module and name, and the
// streams it is made of on the bus.
type kept struct {
	module, local string
	streams       []string
	wait          time.Duration // the longest a verb is waited for (default 30 min)
	target        float64       // keeper ÷ CLI at most for its snapshot and restore (default 1.0)
}

func (k kept) req() keeper.Request {
	q := keeperRequest(k.module, k.local, 1, "bench")
	q.Why = "benchmark restore"
	return q
}

func (k kept) verbWait() time.Duration {
	if k.wait > 0 {
		return k.wait
	}
	return 30 * time.Minute
}

// keeperVerb times one verb on the shape's keeper, bounded by k's wait.
func (r *run) keeperVerb(ctx context.Context, name string, k kept, verb func(context.Context, keeper.Request) (*keeper.Reply, error)) (Sample, *keeper.Reply, error) {
	return r.keeperOp(ctx, r.file(), name, func(ctx context.Context) (*keeper.Reply, error) {
		vctx, cancel := context.WithTimeout(ctx, k.verbWait())
		defer cancel()
		return verb(vctx, k.req())
	})
}

// keptPairs measures the kept data k in rounds: snapshot-kept against `nats
// backup stream` of its streams; then restore-kept into the absent kept data
// against `nats backup restore stream` and against the server's own restore
// (shape_server.go), each after the streams were removed (not timed). Every
// restore is checked against what was there before: each stream's state and
// consumers every time, every message's digest in the first round. The
// samples go in sr's rows, named by sr.Shape.
func (r *run) keptPairs(ctx context.Context, sr *ShapeResult, k kept) error {
	want, err := r.before(ctx, sr, k)
	if err != nil {
		return err
	}
	backup, restore := cliCommands(k.streams)
	target := cmp.Or(k.target, 1.0)
	snap := ShapeRow{Op: "`snapshot-kept`", CLI: "`" + backup + "`", Target: target}
	sr.Rows = append(sr.Rows, snap)
	si := len(sr.Rows) - 1
	var archive int64
	// A snapshot pair of under QuickPair is taken as many times as the small
	// KV's (SmallRounds): a median of three samples of some 50 ms says more
	// about the machine's scheduler than about either tool.
	rounds := r.cfg.Rounds
	for i := 0; i < rounds; i++ {
		r.cfg.Log.Info("shape snapshot pair", "shape", sr.Shape, "round", i+1, "of", rounds)
		ks, rep, err := r.keeperVerb(ctx, sr.Shape+"-keeper-snapshot", k, r.file().client.SnapshotKept)
		if err != nil {
			return fmt.Errorf("snapshot-kept of %s/%s, round %d: %w", k.module, k.local, i+1, err)
		}
		if rep.Point != nil {
			archive = rep.Point.ArchiveSize
		}
		ns, err := r.cliBackup(ctx, sr.Shape+"-nats-backup", k.streams)
		if err != nil {
			return fmt.Errorf("nats backup stream, round %d: %w", i+1, err)
		}
		p := &sr.Rows[si].Pairs
		p.Keeper, p.Nats = append(p.Keeper, ks), append(p.Nats, ns)
		if i == 0 && ks.Wall+ns.Wall < r.cfg.QuickPair {
			rounds = max(rounds, r.cfg.SmallRounds)
		}
	}
	if rounds != r.cfg.Rounds {
		sr.Rows[si].Op = fmt.Sprintf("`snapshot-kept` (%d pairs)", rounds)
	}
	var cli int64
	for _, s := range k.streams {
		cli += dirBytes(r.backupDir(s))
	}
	sr.Notes = append(sr.Notes, fmt.Sprintf("the keeper's bus.tar: %s; the nats CLI's backup directories: %s", mib(float64(archive)), mib(float64(cli))))

	raw, err := r.loadRaw(k.streams)
	if err != nil {
		return err
	}
	sr.Rows = append(sr.Rows, ShapeRow{Op: "`restore-kept` into an absent kept data", CLI: "`" + restore + "`", Target: target})
	ri := len(sr.Rows) - 1
	var cliFailed, serverFailed error
	for i := range r.cfg.Rounds {
		r.cfg.Log.Info("shape restore round", "shape", sr.Shape, "round", i+1, "of", r.cfg.Rounds)
		digest := i == 0
		// There unless the server's own restore failed or was left out.
		if err := r.clearStreams(ctx, k.streams); err != nil {
			return err
		}
		ks, _, err := r.keeperVerb(ctx, sr.Shape+"-keeper-restore", k, r.file().client.RestoreKept)
		if err != nil {
			return fmt.Errorf("restore-kept of %s/%s into absent data, round %d: %w", k.module, k.local, i+1, err)
		}
		if err := r.checkSums(ctx, "restore-kept", want, digest); err != nil {
			return err
		}
		if err := r.deleteStreams(ctx, k.streams); err != nil {
			return err
		}
		row := &sr.Rows[ri]
		row.Pairs.Keeper = append(row.Pairs.Keeper, ks)
		// The other sides go on as long as they pass: one the server
		// refused is left out of the row, said in the notes, and the
		// keeper's rounds go on.
		if cliFailed == nil {
			ns, err := r.cliRestore(ctx, sr.Shape+"-nats-restore", k.streams)
			if err == nil {
				err = r.checkSums(ctx, "nats backup restore stream", want, digest)
			}
			if cliFailed = r.sideFailed(ctx, k.streams, i, err); cliFailed == nil {
				row.Pairs.Nats = append(row.Pairs.Nats, ns)
				if err := r.deleteStreams(ctx, k.streams); err != nil {
					return err
				}
			}
		}
		if serverFailed == nil {
			ss, err := r.serverRestoreOp(ctx, sr.Shape+"-server-restore", raw)
			if err == nil {
				err = r.checkSums(ctx, "the server's own restore", want, digest)
			}
			if serverFailed = r.sideFailed(ctx, k.streams, i, err); serverFailed == nil {
				row.Server = append(row.Server, ss)
			}
		}
	}
	row := &sr.Rows[ri]
	if cliFailed != nil {
		row.Pairs.Nats = nil
		sr.Notes = append(sr.Notes, "the nats CLI's restore failed, so the restore row has no CLI side (the keeper's rounds went on): "+oneLine(cliFailed.Error()))
	}
	if serverFailed != nil {
		row.Server = nil
		sr.Notes = append(sr.Notes, "the server's own restore failed, so the restore row has none (the keeper's rounds went on): "+oneLine(serverFailed.Error()))
		// What follows finds the kept data there, as the server's own
		// restore would have left it.
		if err := r.restoreUntimed(ctx, k, want); err != nil {
			return err
		}
	}
	sr.Notes = append(sr.Notes, fmt.Sprintf("after every restore by each tool: every stream's message count, bytes, first and last sequence, and each durable consumer's ack floor as before; "+
		"in the first round also a SHA-256 of every message (sequence, subject, headers, data) of %s", strings.Join(k.streams, ", ")))
	return nil
}

// before is the sums of k's streams before the rounds, every message
// digested; it adds their bytes to sr's.
func (r *run) before(ctx context.Context, sr *ShapeResult, k kept) (map[string]streamSum, error) {
	want, err := r.sumStreams(ctx, k.streams, true)
	for _, w := range want {
		sr.Bytes += float64(w.Bytes)
	}
	return want, err
}

// sideFailed is err of round i's restore by the CLI or the server itself,
// nil when it passed. What a failed restore left is removed.
func (r *run) sideFailed(ctx context.Context, streams []string, i int, err error) error {
	if err == nil {
		return nil
	}
	r.cfg.Log.Warn("a restore other than the keeper's failed; the keeper's rounds go on without it", "round", i+1, "err", err)
	if cerr := r.clearStreams(ctx, streams); cerr != nil {
		return fmt.Errorf("round %d: %w; and what it left was not removed: %w", i+1, err, cerr)
	}
	return fmt.Errorf("round %d: %w", i+1, err)
}

// restoreUntimed puts k's absent streams back with restore-kept, not
// timed, and checks them.
func (r *run) restoreUntimed(ctx context.Context, k kept, want map[string]streamSum) error {
	if err := r.clearStreams(ctx, k.streams); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, k.verbWait())
	defer cancel()
	if _, err := r.file().client.RestoreKept(rctx, k.req()); err != nil {
		return fmt.Errorf("restore-kept of %s/%s (not timed): %w", k.module, k.local, err)
	}
	return r.checkSums(ctx, "restore-kept", want, false)
}

// clearStreams removes the streams that are there and waits until their
// files are gone.
func (r *run) clearStreams(ctx context.Context, streams []string) error {
	r.deleteStreamsIfThere(ctx, streams)
	for _, s := range streams {
		if err := r.waitRemoved(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// rollbackPairs measures the rollback of k in rounds: restore-kept of its
// point with the kept data live (verify the point, set the live data aside,
// restore) against what an operator does by hand with the nats CLI: `nats
// backup stream` of the live data (its aside), `nats stream rm -f`, and
// `nats backup restore stream` of a backup taken with the point (not timed).
// The aside is discarded after each round (not timed), and the data checked.
func (r *run) rollbackPairs(ctx context.Context, sr *ShapeResult, k kept) error {
	want, err := r.before(ctx, sr, k)
	if err != nil {
		return err
	}
	if _, _, err := r.keeperVerb(ctx, sr.Shape+"-keeper-point", k, r.file().client.SnapshotKept); err != nil {
		return fmt.Errorf("snapshot-kept of %s/%s, the point to roll back to: %w", k.module, k.local, err)
	}
	pointDir := func(s string) string { return filepath.Join(r.work, "nats-backup", "point-"+s) }
	asideDir := func(s string) string { return filepath.Join(r.work, "nats-backup", "aside-"+s) }
	if _, err := r.natsOp(ctx, sr.Shape+"-nats-point", k.streams, func(s string) []string {
		return []string{"backup", "stream", s, pointDir(s), "--no-progress"}
	}); err != nil {
		return fmt.Errorf("nats backup stream, the point to roll back to: %w", err)
	}
	sr.Rows = append(sr.Rows, ShapeRow{Op: "`restore-kept` method full with the kept data live (verify, set aside, restore)", CLI: "`" + byHandCommands(k.streams) + "`", Target: 0.75})
	ri := len(sr.Rows) - 1
	var verify []Sample
	var handFailed error
	for i := range r.cfg.Rounds {
		r.cfg.Log.Info("shape rollback pair", "shape", sr.Shape, "round", i+1, "of", r.cfg.Rounds)
		if err := r.waitAllFiles(ctx, k.streams); err != nil {
			return err
		}
		ks, rep, err := r.keeperVerb(ctx, sr.Shape+"-keeper-rollback", k, restoreFull(r.file()))
		if err != nil {
			return fmt.Errorf("restore-kept of %s/%s with the kept data live, round %d: %w", k.module, k.local, i+1, err)
		}
		if rep.Aside == nil {
			return fmt.Errorf("restore-kept with the kept data live, round %d, set nothing aside: %s", i+1, rep.Said)
		}
		if err := r.checkBack(ctx, "restore-kept with the kept data live", want, i == 0); err != nil {
			return err
		}
		discard := keeperRequest("", "", 0, "")
		discard.Why = "benchmark: the aside is not needed"
		if _, err := r.file().client.DiscardAside(ctx, rep.Aside.ID, discard); err != nil {
			return fmt.Errorf("discard-aside %s: %w", rep.Aside.ID, err)
		}
		if err := r.waitAllFiles(ctx, k.streams); err != nil { // the files of what the keeper removed
			return err
		}
		row := &sr.Rows[ri]
		row.Pairs.Keeper = append(row.Pairs.Keeper, ks)
		verify = append(verify, ks)
		if handFailed != nil {
			continue
		}
		// By hand, as long as it passes: a round the server refused is
		// left out of the row and said in the notes, the data put back
		// (not timed), and the keeper's rounds go on.
		ns, err := r.rollbackByHand(ctx, sr.Shape, k.streams, pointDir, asideDir)
		if err == nil {
			err = r.checkSums(ctx, "the rollback by hand", want, i == 0)
		}
		if err != nil {
			handFailed = fmt.Errorf("round %d: %w", i+1, err)
			r.cfg.Log.Warn("the rollback by hand failed; the keeper's rounds go on without it", "round", i+1, "err", err)
			if err := r.restoreUntimed(ctx, k, want); err != nil {
				return fmt.Errorf("after the rollback by hand failed: %w", err)
			}
			continue
		}
		row.Pairs.Nats = append(row.Pairs.Nats, ns)
	}
	if handFailed != nil {
		sr.Rows[ri].Pairs.Nats = nil
		sr.Notes = append(sr.Notes, "the rollback by hand failed, so the rollback row has no CLI side (the keeper's rounds went on): "+oneLine(handFailed.Error()))
	}
	sr.Notes = append(sr.Notes, "of the keeper's rollback, verifying the point whole before anything is set aside took "+secs(summarize(pick(verify, verifyTime))))
	return nil
}

// restoreFull is k's restore-kept with method full: the rollbacks that
// measure the whole data set aside and restored (today's rollback), which
// auto would make a delta when nothing changed since the point.
func restoreFull(k *keeperSvc) func(context.Context, keeper.Request) (*keeper.Reply, error) {
	return func(ctx context.Context, q keeper.Request) (*keeper.Reply, error) {
		q.Method = keeperMethodFull
		return k.client.RestoreKept(ctx, q)
	}
}

// rollbackByHand is what an operator does with the nats CLI: `nats backup
// stream` of the live streams (the aside), `nats stream rm -f`, and `nats
// backup restore stream` of the point's backup; timed together.
func (r *run) rollbackByHand(ctx context.Context, shape string, streams []string, pointDir, asideDir func(string) string) (Sample, error) {
	var ns Sample
	for _, step := range []struct {
		name    string
		args    func(s string) []string
		restore bool
	}{
		{"-nats-aside", func(s string) []string {
			os.RemoveAll(asideDir(s))
			return []string{"backup", "stream", s, asideDir(s), "--no-progress"}
		}, false},
		{"-nats-rm", func(s string) []string { return []string{"stream", "rm", "-f", s} }, false},
		{"-nats-restore", func(s string) []string {
			return []string{"--timeout", cliTimeout, "backup", "restore", "stream", pointDir(s), "--no-progress"}
		}, true},
	} {
		one, err := r.natsStreams(ctx, shape+step.name, streams, step.args, step.restore)
		if err != nil {
			return Sample{}, fmt.Errorf("the rollback by hand: %w", err)
		}
		ns = addSamples(ns, one)
	}
	return ns, nil
}

// waitAllFiles is waitFiles of each stream (not timed), before an
// operation that removes them again.
func (r *run) waitAllFiles(ctx context.Context, streams []string) error {
	for _, s := range streams {
		if err := r.waitFiles(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// addSamples is the cost of two operations one after the other.
func addSamples(a, b Sample) Sample {
	return Sample{Wall: a.Wall + b.Wall, ClientCPU: a.ClientCPU + b.ClientCPU, ClientSys: a.ClientSys + b.ClientSys,
		PeakRSS: max(a.PeakRSS, b.PeakRSS), ServerCPU: a.ServerCPU + b.ServerCPU, ServerSys: a.ServerSys + b.ServerSys}
}
