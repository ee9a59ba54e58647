package keeper

import (
	"context"
	"slices"
	"time"
)

// The positions sample of a round is a census of the module's consumers,
// which the bus may take seconds to confirm (it is taken again while
// consumers are made or removed anywhere in the account, as a module's KV
// watchers and the keeper's own reads do). A round does not wait for a slow
// one longer than sampleWait: its segment carries the last sample committed,
// with that sample's own time, and the sample goes on in the background,
// for a later round to take. So a slow census costs the window's end
// nothing, and a restore to a moment still gets the newest sample at or
// before it, its age said.

// sampleWait is how long a round waits for its positions sample when it has
// one to carry: half of segment-every, at most 500 ms.
func sampleWait(every time.Duration) time.Duration {
	return min(every/2, 500*time.Millisecond)
}

// sampleJob is one positions sample, taken on a goroutine of its own.
type sampleJob struct {
	done      chan struct{}
	positions []Position // set before done is closed
	at        time.Time
	err       error
}

// positions gives seg its positions sample. A segment gathered straight
// after one cut at its bytes (prev, else nil) carries prev's sample while
// that is younger than segment-every: the consumers are sampled once a
// segment-every, as when no segment is cut, not once a segment. A sample
// slower than sampleWait is left to a later round, and seg carries the last
// sample committed (none at a chain's first round: it waits); a later round
// takes that sample once it is done, and does not wait for it.
func (c *capturer) positions(ctx context.Context, seg, prev *segment, every time.Duration) error {
	if prev != nil && seg.Began.Sub(prev.PositionsAt) < every {
		seg.Positions, seg.PositionsAt = prev.Positions, prev.PositionsAt
		return nil
	}
	job, wait := c.sampling, sampleWait(every)
	if job == nil {
		job = c.startSample(ctx)
	} else {
		wait = 0 // under way since an earlier round: taken only if done
	}
	if c.lastSampleAt.IsZero() {
		wait = -1 // nothing to carry: it waits (the census bounds its own tries)
	}
	if done, err := awaitSample(ctx, job, wait); err != nil {
		return err
	} else if !done {
		c.sampling = job
		c.k.log.Debug("the consumers' positions are slow to sample; the segment carries the last sample", "kept", c.kept(),
			"sampled", c.lastSampleAt, "waited", wait)
		seg.Positions, seg.PositionsAt = c.lastSample, c.lastSampleAt
		return nil
	}
	c.sampling = nil
	if job.err != nil {
		return job.err
	}
	seg.Positions, seg.PositionsAt = job.positions, job.at
	return nil
}

// awaitSample waits up to wait for job (0: not at all; below 0: until it
// is done), and reports whether it is done.
func awaitSample(ctx context.Context, job *sampleJob, wait time.Duration) (bool, error) {
	select {
	case <-job.done:
		return true, nil
	default:
	}
	if wait == 0 {
		return false, nil
	}
	var bound <-chan time.Time // nil: never
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		bound = t.C
	}
	select {
	case <-job.done:
		return true, nil
	case <-bound:
		return false, nil
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

// startSample begins a positions sample of the streams followed now.
func (c *capturer) startSample(ctx context.Context) *sampleJob {
	job := &sampleJob{done: make(chan struct{})}
	names := make([]string, len(c.follows))
	for i, f := range c.follows {
		names[i] = f.name
	}
	k, module, local := c.k, c.rec.Module, c.rec.Local
	go func() {
		defer close(job.done)
		job.positions, job.err = k.samplePositions(ctx, module, local, names)
		job.at = k.now().UTC()
	}()
	return job
}

// samplePositions reads the positions of every durable consumer on the
// kept data's streams (followed) and of the module's consumers on other
// streams that the kept data owns.
func (k *Keeper) samplePositions(ctx context.Context, module, local string, followed []string) ([]Position, error) {
	named, err := k.planConsumers(ctx, module, local)
	if err != nil {
		return nil, err
	}
	streams, all, err := k.census(ctx, CensusQuery{Module: module, Named: named})
	if err != nil {
		return nil, err
	}
	o, err := k.owners(ctx, streams, module, consumerNames(all))
	if err != nil {
		return nil, err
	}
	out := []Position{}
	for _, p := range all {
		if slices.Contains(followed, p.Stream) || o.owns(module, local, p) {
			out = append(out, p)
		}
	}
	return out, nil
}
