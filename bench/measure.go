package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

func keeperRequest(mod, loc string, form int, fingerprint string) keeper.Request {
	return keeper.Request{Module: mod, Local: loc, Form: form, Fingerprint: fingerprint, Caller: "keeper-bench"}
}

// measure runs the comparisons in alternating pairs.
func (r *run) measure(ctx context.Context) error {
	res := r.res
	backup := func(stream string) string { return filepath.Join(r.work, "nats-backup", stream) }
	res.Commands = append(r.bigCommands(),
		fmt.Sprintf(`small KV: snapshot-kept {"module":%q,"local":%q,"form":1,"fingerprint":"bench"} timed from request to reply, against nats --server %s backup stream %s DIR --no-progress as a whole process`, smallModule, smallLocal, r.shownURL(), smallStream))

	if err := r.measureBig(ctx); err != nil {
		return err
	}

	smallReq := keeperRequest(smallModule, smallLocal, 1, "bench")
	for i := range r.cfg.SmallRounds {
		k, _, err := r.keeperOp(ctx, r.file(), "keeper-small", func(ctx context.Context) (*keeper.Reply, error) { return r.file().client.SnapshotKept(ctx, smallReq) })
		if err != nil {
			return fmt.Errorf("snapshot-kept of the small KV, round %d: %w", i+1, err)
		}
		n, err := r.natsOp(ctx, "nats-small", []string{smallStream}, func(s string) []string {
			os.RemoveAll(backup(s))
			return []string{"backup", "stream", s, backup(s), "--no-progress"}
		})
		if err != nil {
			return fmt.Errorf("nats backup stream %s, round %d: %w", smallStream, i+1, err)
		}
		res.SmallKV.Keeper, res.SmallKV.Nats = append(res.SmallKV.Keeper, k), append(res.SmallKV.Nats, n)
	}
	if peak, err := peakRSS(r.file().proc.pid()); err == nil {
		res.KeeperRunPeak = max(res.KeeperRunPeak, peak)
	}
	return nil
}

// bigCommands is what the big comparisons run, as the report shows it.
func (r *run) bigCommands() []string {
	u := r.shownURL()
	return []string{
		r.file().command,
		fmt.Sprintf(`snapshot-kept: request %s {"module":%q,"local":%q,"form":1,"fingerprint":"bench","caller":"keeper-bench"} (verbs.Client.SnapshotKept)`, "mesh-broker.snapshot-kept", module, local),
		fmt.Sprintf(`nats --server %s backup stream %s DIR/%s --no-progress`, u, dataStream, dataStream),
		fmt.Sprintf(`nats --server %s backup stream %s DIR/%s --no-progress`, u, kvStream, kvStream),
		fmt.Sprintf(`restore-kept: request mesh-broker.restore-kept {"module":%q,"local":%q,"form":1,"fingerprint":"bench","why":"benchmark restore","caller":"keeper-bench"} (verbs.Client.RestoreKept), after deleting both streams (not timed)`, module, local),
		fmt.Sprintf(`nats --server %s backup restore stream DIR/%s --no-progress, then DIR/%s, after deleting both streams (not timed)`, u, dataStream, kvStream),
		`aside + restore: the same restore-kept request with the kept data live; discard-aside afterwards (not timed)`,
		`before every timed operation (each nats CLI process, each keeper verb): sync(2) of the whole machine, not timed, so no operation pays for the writeback another left behind`,
	}
}

// measureBig runs the big comparisons in alternating pairs: snapshot-kept
// against nats backup stream, restore-kept into an absent kept data against
// nats backup restore stream, and restore-kept with the kept data live.
func (r *run) measureBig(ctx context.Context) error {
	log, res := r.cfg.Log, r.res
	big := []string{dataStream, kvStream}
	backup := func(stream string) string { return filepath.Join(r.work, "nats-backup", stream) }
	res.PhaseLoads = append(res.PhaseLoads, "the snapshot pairs: "+loadAverage())
	for i := range r.cfg.Rounds {
		log.Info("snapshot pair", "round", i+1, "of", r.cfg.Rounds)
		k, err := r.snapshotOp(ctx, r.file(), "keeper-snapshot", i)
		if err != nil {
			return err
		}
		n, err := r.natsOp(ctx, "nats-backup", big, func(s string) []string {
			os.RemoveAll(backup(s))
			return []string{"backup", "stream", s, backup(s), "--no-progress"}
		})
		if err != nil {
			return fmt.Errorf("nats backup stream, round %d: %w", i+1, err)
		}
		res.Snapshot.Keeper, res.Snapshot.Nats = append(res.Snapshot.Keeper, k), append(res.Snapshot.Nats, n)
	}

	res.PhaseLoads = append(res.PhaseLoads, "the restore pairs: "+loadAverage())
	for i := range r.cfg.Rounds {
		log.Info("restore pair", "round", i+1, "of", r.cfg.Rounds)
		k, err := r.restoreOp(ctx, r.file(), "keeper-restore", i)
		if err != nil {
			return err
		}
		if err := r.deleteStreams(ctx, big); err != nil {
			return err
		}
		n, err := r.natsRestoreOp(ctx, "nats-restore", big, func(s string) []string {
			return []string{"backup", "restore", "stream", backup(s), "--no-progress"}
		})
		if err != nil {
			return fmt.Errorf("nats backup restore stream, round %d: %w", i+1, err)
		}
		if err := r.checkRestored(ctx, restoreByNats); err != nil {
			return fmt.Errorf("after nats backup restore stream, round %d: %w", i+1, err)
		}
		res.Restore.Keeper, res.Restore.Nats = append(res.Restore.Keeper, k), append(res.Restore.Nats, n)
	}

	res.PhaseLoads = append(res.PhaseLoads, "the restores with the kept data live: "+loadAverage())
	for i := range r.cfg.Rounds {
		log.Info("aside + restore", "round", i+1, "of", r.cfg.Rounds)
		k, err := r.asideOp(ctx, r.file(), "keeper-aside-restore", i)
		if err != nil {
			return err
		}
		res.AsideRestore.Keeper = append(res.AsideRestore.Keeper, k)
	}
	return nil
}

// keeperOp times one verb through the running service k, with the keeper's
// CPU and peak RSS, the server's CPU and the store server's CPU meanwhile.
func (r *run) keeperOp(ctx context.Context, k *keeperSvc, name string, op func(context.Context) (*keeper.Reply, error)) (Sample, *keeper.Reply, error) {
	kpid, servers := k.proc.pid(), r.serverPIDs()
	pids := append([]int{kpid}, servers...)
	if k.side != nil {
		pids = append(pids, k.side.pid())
	}
	settle()
	if r.res.PeakExact {
		if err := resetPeakRSS(kpid); err != nil {
			return Sample{}, nil, err
		}
	}
	before, berr := cpuOf(pids)
	logFrom := len(k.proc.log.String())
	rec := r.prof.start(name, r.cfg.Log, pids...)
	start := time.Now()
	rep, err := op(ctx)
	wall := time.Since(start)
	if perr := rec.stop(ctx); perr != nil {
		r.cfg.Log.Warn("profiling failed", "err", perr)
	}
	after, aerr := cpuOf(pids)
	if err != nil {
		return Sample{}, nil, fmt.Errorf("%w; the keeper's log:\n%s", err, k.proc.tail())
	}
	if err := errors.Join(berr, aerr); err != nil {
		return Sample{}, nil, err
	}
	peak, err := peakRSS(kpid)
	if err != nil {
		return Sample{}, nil, err
	}
	if k == r.file() {
		r.res.KeeperRunPeak = max(r.res.KeeperRunPeak, peak)
	}
	used := func(i int) cpuTime { return after[i].sub(before[i]) }
	kc, sc, xc := used(0), sumCPU(before[1:1+len(servers)], after[1:1+len(servers)]), cpuTime{}
	if k.side != nil {
		xc = used(len(pids) - 1)
	}
	verify := verifyTook(k.proc.log.String()[logFrom:])
	return Sample{Wall: wall, ClientCPU: kc.all, ClientSys: kc.sys, PeakRSS: peak, ServerCPU: sc.all, ServerSys: sc.sys,
		StoreCPU: xc.all, StoreSys: xc.sys, Verify: verify}, rep, nil
}

// natsOp runs the nats CLI once per stream, one after the other, and sums
// the costs (the peak RSS is the largest process's).
func (r *run) natsOp(ctx context.Context, name string, streams []string, args func(stream string) []string) (Sample, error) {
	return r.natsStreams(ctx, name, streams, args, false)
}

// natsRestoreOp is natsOp of a `nats backup restore stream` of each of
// streams: a stream's restore the server refused in a way that says nothing
// of the data (cliRestoreRefused) is tried again, that stream only, after
// removing what it left, up to cliRestoreTries times. Only the attempt that
// succeeded is timed.
func (r *run) natsRestoreOp(ctx context.Context, name string, streams []string, args func(stream string) []string) (Sample, error) {
	return r.natsStreams(ctx, name, streams, args, true)
}

// cliRestoreTries bounds the attempts of one stream's CLI restore.
const cliRestoreTries = 5

func (r *run) natsStreams(ctx context.Context, name string, streams []string, args func(stream string) []string, restore bool) (Sample, error) {
	var s Sample
	spids := r.serverPIDs()
	rec := r.prof.start(name, r.cfg.Log, spids...) // the servers only: the CLI's process does not exist yet
	defer func() {
		if perr := rec.stop(ctx); perr != nil {
			r.cfg.Log.Warn("profiling failed", "err", perr)
		}
	}()
	for _, stream := range streams {
		one, err := r.natsOne(ctx, spids, stream, args)
		for try := 1; restore && cliRestoreRefused(err) && try < cliRestoreTries; try++ {
			r.cfg.Log.Warn("the nats CLI's restore was refused by the server in a way that says nothing of the data; that stream once more, the failed attempt not timed",
				"stream", stream, "attempt", try, "of", cliRestoreTries, "err", err)
			if err := r.clearStreams(ctx, []string{stream}); err != nil {
				return s, err
			}
			time.Sleep(time.Duration(try) * time.Second)
			one, err = r.natsOne(ctx, spids, stream, args)
		}
		if err != nil {
			return s, err
		}
		s = addSamples(s, one)
	}
	return s, nil
}

// natsOne runs the nats CLI once on stream, timed, with the servers' CPU
// meanwhile.
func (r *run) natsOne(ctx context.Context, spids []int, stream string, args func(stream string) []string) (Sample, error) {
	var s Sample
	settle() // before args, which may remove the previous backup, as an operator would just before taking one
	a := append([]string{"--server", r.url}, args(stream)...)
	scpu0, err := cpuOf(spids)
	if err != nil {
		return s, err
	}
	t, err := runTimed(ctx, r.env, r.nats, a...)
	if err != nil {
		return s, err
	}
	scpu1, err := cpuOf(spids)
	if err != nil {
		return s, err
	}
	sc := sumCPU(scpu0, scpu1)
	return Sample{Wall: t.wall, ClientCPU: t.cpu, ClientSys: t.sys, PeakRSS: t.peakRSS, ServerCPU: sc.all, ServerSys: sc.sys}, nil
}

// settle writes every dirty page of the machine to disk before an operation
// is timed (not timed itself), so that the writeback one operation left
// behind (the nats CLI's backup files and the server's stores are not synced
// when the operation ends) is not paid by whichever operation comes next.
func settle() { syscall.Sync() }

// deleteStreams removes the streams (not timed), so the next restore finds
// the kept data absent.
func (r *run) deleteStreams(ctx context.Context, streams []string) error {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return err
	}
	for _, s := range streams {
		if err := js.DeleteStream(ctx, s); err != nil {
			return fmt.Errorf("delete stream %s between rounds: %w", s, err)
		}
		if err := r.waitRemoved(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// deleteStreamsIfThere removes those of the streams that exist.
func (r *run) deleteStreamsIfThere(ctx context.Context, streams []string) {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return
	}
	for _, s := range streams {
		_ = js.DeleteStream(ctx, s)
	}
}

// checkRestored checks that the kept data is back whole: every message and
// key, and the consumer. On the cluster it also records the streams'
// replicas and waits for them to be current; by says who restored.
func (r *run) checkRestored(ctx context.Context, by string) error {
	js, err := jetstream.New(r.nc)
	if err != nil {
		return err
	}
	want := map[string]uint64{dataStream: uint64(r.res.Data.Messages), kvStream: uint64(r.res.Data.KVKeys)}
	for name, msgs := range want {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s is not there: %w", name, err)
		}
		if got := s.CachedInfo().State.Msgs; got != msgs {
			return fmt.Errorf("stream %s holds %d messages, not %d", name, got, msgs)
		}
	}
	if err := waitConsumer(ctx, js, dataStream, consumer); err != nil {
		return fmt.Errorf("consumer %s is not there: %w", consumer, err)
	}
	if r.cfg.Cluster {
		return r.checkReplicas(ctx, js, by)
	}
	return nil
}

// waitConsumer waits, up to 30 s, for a restored stream's consumer: on a
// cluster a restore answers once its stream is restored, and its
// consumers, proposed to the cluster after, may be unknown for a moment
// more to the server asked (404, consumer not found).
func waitConsumer(ctx context.Context, js jetstream.JetStream, stream, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := js.Consumer(ctx, stream, name)
		if err == nil || !errors.Is(err, jetstream.ErrConsumerNotFound) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cliRestoreRefused reports whether a nats CLI restore failed in a way
// seen right after the streams were deleted, on a loaded machine, that
// says nothing of the data, so that it is tried again (after removing
// what it left):
//   - the server refused a restore into a stream it had just deleted
//     ("expected sequence does not match store", 10062): its removal had not
//     finished on disk; or it gave the restore up as stalled (10062 too,
//     "read/write on closed pipe") while it made the consumers of one of the
//     CLI's large chunks, slower right after a stream of as many consumers
//     was deleted (the keeper sends a snapshot's consumers in small chunks,
//     see jsbus/restorepacing.go);
//   - on a cluster, the CLI's first chunk found no one listening ("no
//     responders"): the stream's restore was not yet set up on the server
//     that leads it (the keeper asks again too; see jsbus restoreStartTries).
func cliRestoreRefused(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	// 10062 as the keeper's errors say it, or in the JSON the CLI prints.
	return strings.Contains(msg, "(10062)") || strings.Contains(msg, `:10062,`) || strings.Contains(msg, "no responders available")
}
