package bench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// pacedDuration is how long the paced writer writes: the run's size at
// captureRate, from 3 to 30 seconds.
func (r *run) pacedDuration() time.Duration {
	d := time.Duration(float64(r.cfg.Size) / captureRate * float64(time.Second))
	return min(max(d, 3*time.Second), 30*time.Second)
}

// writerRunBytes is what each unpaced writer's run writes: a quarter of
// the run's size, at most 256 MiB.
func (r *run) writerRunBytes() int64 {
	return max(min(r.cfg.Size/4, 256<<20), int64(64*r.cfg.MsgSize))
}

// pacedWrite writes captureRate bytes a second to the stream for
// pacedDuration while list-kept's lag of the capture is sampled every
// 500 ms; then, once the capture holds all of it, compares the bytes the
// chain's segments hold with what the stream grew by since the chain's
// base.
func (c *captureRun) pacedWrite(ctx context.Context) error {
	d := c.r.pacedDuration()
	c.r.cfg.Log.Info("shape capture: paced writer", "rate", captureRate, "for", d)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.sampleLag(ctx, stop)
	}()
	wrote, took, err := c.write(ctx, d, captureRate, 0)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	c.fig.Paced, c.fig.Achieved = took, float64(wrote)/took.Seconds()
	if err := c.caughtUp(ctx, time.Now()); err != nil {
		return err
	}
	sums, err := c.r.sumStreams(ctx, c.k.streams, false)
	if err != nil {
		return err
	}
	c.fig.Written = int64(sums[c.k.streams[0]].Bytes) - c.baseBytes
	c.fig.StoreBytes, err = c.chainBytes()
	return err
}

// sampleLag adds list-kept's lag of the capture to the figures every
// 500 ms until stop is closed.
func (c *captureRun) sampleLag(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		asked := time.Now()
		ci, err := c.captureOf(ctx)
		if err != nil || ci.To == nil {
			c.r.cfg.Log.Warn("the capture's lag could not be read", "err", err)
			continue
		}
		lag := max(0, time.Since(*ci.To))
		if lag > captureLagTarget*3/4 {
			c.r.cfg.Log.Info("shape capture: a long lag", "lag", lag, "keeper's", time.Duration(ci.LagMS)*time.Millisecond,
				"asked", asked.Format(time.RFC3339Nano), "list-kept took", time.Since(asked), "to", ci.To.Format(time.RFC3339Nano))
		}
		c.fig.Lags = append(c.fig.Lags, lag)
	}
}

// write publishes cfg.MsgSize messages to the stream for d or until limit
// bytes are written (0: no limit), at rate bytes a second (0: as fast as
// the server takes them), and waits for every acknowledgement; it returns
// the bytes written and how long that took.
func (c *captureRun) write(ctx context.Context, d time.Duration, rate float64, limit int64) (int64, time.Duration, error) {
	js, err := c.r.shapeJS()
	if err != nil {
		return 0, 0, err
	}
	subjects := int64(max(c.r.cfg.Subjects, 1))
	var wrote int64
	start := time.Now()
	for i := int64(0); ; i++ {
		el := time.Since(start)
		if el >= d || (limit > 0 && wrote >= limit) || ctx.Err() != nil {
			break
		}
		if rate > 0 && float64(wrote) >= rate*el.Seconds() {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		p := make([]byte, c.r.cfg.MsgSize)
		c.pay(i, p)
		idx := i % subjects
		if _, err := js.PublishAsync(fmt.Sprintf("%s.g%d.i%d", c.prefix, idx/1000, idx%1000), p, jetstream.WithStallWait(stallWait)); err != nil {
			return wrote, 0, fmt.Errorf("write message %d to %s: %w", i+1, c.k.streams[0], err)
		}
		wrote += int64(len(p))
	}
	if err := js.done(ctx); err != nil {
		return wrote, 0, err
	}
	return wrote, time.Since(start), nil
}

// writeN publishes n bytes in cfg.MsgSize messages as fast as the server
// takes them; it returns how long that took.
func (c *captureRun) writeN(ctx context.Context, n int64) (time.Duration, error) {
	_, took, err := c.write(ctx, time.Hour, 0, n)
	return took, err
}

// writerRuns measures the writers' throughput without and with capture
// in rounds: capture off, an unpaced run; capture on (waited for until it
// holds everything), an unpaced run; each first in turn.
func (c *captureRun) writerRuns(ctx context.Context) error {
	n := c.r.writerRunBytes()
	c.fig.RunBytes = n
	for i := range c.r.cfg.Rounds {
		c.r.cfg.Log.Info("shape capture: writers without and with capture", "round", i+1, "of", c.r.cfg.Rounds)
		for j := range 2 {
			on := (i+j)%2 == 1
			if err := c.turnFor(ctx, on); err != nil {
				return err
			}
			took, used, err := c.writerRun(ctx, n, on)
			if err != nil {
				return err
			}
			if on {
				c.fig.With = append(c.fig.With, float64(n)/took.Seconds())
				c.fig.WithCPU = append(c.fig.WithCPU, used)
			} else {
				c.fig.Without = append(c.fig.Without, float64(n)/took.Seconds())
				c.fig.WithoutCPU = append(c.fig.WithoutCPU, used)
			}
		}
	}
	return c.turnFor(ctx, true)
}

// writerRun is one unpaced run of n bytes, profiled (the first with
// capture on and the first without) when the run profiles: how long it
// took and the CPU the keeper and the server used meanwhile.
func (c *captureRun) writerRun(ctx context.Context, n int64, on bool) (time.Duration, WriterCPU, error) {
	kpid, servers := c.r.file().proc.pid(), c.r.serverPIDs()
	pids := append([]int{kpid}, servers...)
	before, err := cpuOf(pids)
	if err != nil {
		return 0, WriterCPU{}, err
	}
	name := "capture-writers-off"
	if on {
		name = "capture-writers-on"
	}
	rec := c.r.prof.start(c.sr.Shape+"-"+name, c.r.cfg.Log, pids...)
	took, err := c.writeN(ctx, n)
	if perr := rec.stop(ctx); perr != nil {
		c.r.cfg.Log.Warn("profiling failed", "err", perr)
	}
	if err != nil {
		return 0, WriterCPU{}, err
	}
	after, err := cpuOf(pids)
	if err != nil {
		return 0, WriterCPU{}, err
	}
	return took, WriterCPU{Keeper: after[0].sub(before[0]).all, Server: sumCPU(before[1:], after[1:]).all}, nil
}

// turnFor turns capture on (and waits until it holds everything) or off
// (and waits until the keeper has stopped capturing: list-kept says off,
// then a look of the capture loop goes by).
func (c *captureRun) turnFor(ctx context.Context, on bool) error {
	if on {
		return c.turn(ctx, "on")
	}
	if err := c.turn(ctx, "off"); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; {
		ci, err := c.captureOf(ctx)
		if err == nil && !ci.On {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("list-kept still says capture of %s/%s is on a minute after it was turned off (%v)", c.k.module, c.k.local, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(3 * time.Second):
		return nil
	}
}

// chainBytes is what the newest chain of the kept data holds in the file
// store: every segment's archive and record.
func (c *captureRun) chainBytes() (int64, error) {
	root := filepath.Join(c.r.work, "keeper", "capture", c.k.module, c.k.local)
	chains, err := os.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("the capture's chains are not in the store: %w", err)
	}
	names := make([]string, 0, len(chains))
	for _, e := range chains {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("no chain of the capture in %s", root)
	}
	slices.Sort(names)
	var n int64
	err = filepath.WalkDir(filepath.Join(root, names[len(names)-1]), func(_ string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		fi, err := e.Info()
		n += fi.Size()
		return err
	})
	return n, err
}
