package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
	keptwire "github.com/nats-keeper/nats-keeper/kept"
)

// fullRun is the full points of the kept data, taken with capture off:
// the other side of the incremental point and of the restore to a moment.
type fullRun struct {
	samples []Sample
	want    map[string]streamSum // the kept data at the point, every message digested
}

// fullPoints takes the kept data's full point in rounds, capture off, each
// replacing the one before.
func (c *captureRun) fullPoints(ctx context.Context) (fullRun, error) {
	want, err := c.r.before(ctx, c.sr, c.k)
	if err != nil {
		return fullRun{}, err
	}
	out := fullRun{want: want}
	for i := range c.r.cfg.Rounds {
		c.r.cfg.Log.Info("shape capture: full point", "round", i+1, "of", c.r.cfg.Rounds)
		s, rep, err := c.r.keeperVerb(ctx, c.sr.Shape+"-keeper-full-point", c.k, c.r.file().client.SnapshotKept)
		if err != nil {
			return out, fmt.Errorf("snapshot-kept of %s/%s, capture off, round %d: %w", c.k.module, c.k.local, i+1, err)
		}
		if rep.Point == nil || rep.Point.Incremental {
			return out, fmt.Errorf("snapshot-kept of %s/%s with capture off did not take a full point (it said: %s)", c.k.module, c.k.local, oneLine(rep.Said))
		}
		out.samples = append(out.samples, s)
	}
	return out, nil
}

// momentRounds measures restore-kept at a moment against restore-kept of
// the full point, both method full with the kept data live (set aside,
// then restored), in rounds, each first in turn. Before the moment's
// restore 1 MiB is appended and captured (the moment is just after it),
// then 1 MiB more (the change rolled back); before the point's, 1 MiB is
// appended. After each restore the capture takes a new base (the stream
// was made again), which is waited for, not timed.
func (c *captureRun) momentRounds(ctx context.Context, full fullRun) error {
	c.sr.Rows = append(c.sr.Rows, ShapeRow{Op: fmt.Sprintf("`restore-kept` at a moment, method full, the kept data live (set aside + restore); the moment %s after the chain's base", mib(float64(c.r.tailSize()))),
		Versus: "`restore-kept` of the kept data's full point, method full, the kept data live", Target: momentTarget})
	ri := len(c.sr.Rows) - 1
	for i := range c.r.cfg.Rounds {
		c.r.cfg.Log.Info("shape capture: restore to a moment against a full restore", "round", i+1, "of", c.r.cfg.Rounds)
		var ms, fs Sample
		var err error
		for j := range 2 {
			if (i+j)%2 == 0 {
				ms, err = c.momentRound(ctx, i)
			} else {
				fs, err = c.fullRound(ctx, full, i)
			}
			if err != nil {
				return err
			}
		}
		p := &c.sr.Rows[ri].Pairs
		p.Keeper, p.Nats = append(p.Keeper, ms), append(p.Nats, fs)
	}
	c.sr.Notes = append(c.sr.Notes, "after every restore to a moment, the stream held the messages it held at the moment (every message's SHA-256, its count, bytes and "+
		"first sequence, the consumer's ack floor); after every restore of the full point, those of the point")
	return nil
}

// momentRound is one timed restore to a moment, checked and its aside
// discarded; then the capture's new base is waited for.
func (c *captureRun) momentRound(ctx context.Context, i int) (Sample, error) {
	if err := c.r.appendTail(ctx, c.k.streams[0], c.prefix, c.pay); err != nil {
		return Sample{}, err
	}
	at := time.Now()
	if err := c.caughtUp(ctx, at); err != nil {
		return Sample{}, err
	}
	want, err := c.r.sumStreams(ctx, c.k.streams, true)
	if err != nil {
		return Sample{}, err
	}
	if err := c.r.appendTail(ctx, c.k.streams[0], c.prefix, c.pay); err != nil {
		return Sample{}, err
	}
	if err := c.r.waitAllFiles(ctx, c.k.streams); err != nil {
		return Sample{}, err
	}
	s, rep, err := c.r.keeperVerb(ctx, c.sr.Shape+"-keeper-at", c.k, func(ctx context.Context, q keeper.Request) (*keeper.Reply, error) {
		q.At, q.Form, q.Fingerprint, q.Method = at.UTC().Format(time.RFC3339Nano), 0, "", keptwire.MethodFull
		return c.r.file().client.RestoreKept(ctx, q)
	})
	if err != nil {
		return Sample{}, fmt.Errorf("restore-kept of %s/%s at %s, round %d: %w", c.k.module, c.k.local, at.Format(time.RFC3339Nano), i+1, err)
	}
	if err := c.r.checkBack(ctx, "restore-kept at a moment", want, true); err != nil {
		return Sample{}, fmt.Errorf("round %d: %w", i+1, err)
	}
	return s, c.afterRestore(ctx, rep)
}

// fullRound is one timed restore of the full point, after 1 MiB appended,
// checked and its aside discarded; then the capture's new base is waited
// for.
func (c *captureRun) fullRound(ctx context.Context, full fullRun, i int) (Sample, error) {
	if err := c.r.appendTail(ctx, c.k.streams[0], c.prefix, c.pay); err != nil {
		return Sample{}, err
	}
	if err := c.r.waitAllFiles(ctx, c.k.streams); err != nil {
		return Sample{}, err
	}
	s, rep, err := c.r.keeperVerb(ctx, c.sr.Shape+"-keeper-full-restore", c.k, restoreFull(c.r.file()))
	if err != nil {
		return Sample{}, fmt.Errorf("restore-kept of the full point of %s/%s, round %d: %w", c.k.module, c.k.local, i+1, err)
	}
	if err := c.r.checkBack(ctx, "restore-kept of the full point", full.want, true); err != nil {
		return Sample{}, fmt.Errorf("round %d: %w", i+1, err)
	}
	return s, c.afterRestore(ctx, rep)
}

// afterRestore waits until the capture has its new base and reaches past
// now (the base's snapshot holds the kept data meanwhile), then discards
// the restore's aside.
func (c *captureRun) afterRestore(ctx context.Context, rep *keeper.Reply) error {
	if err := c.caughtUp(ctx, time.Now()); err != nil {
		return err
	}
	if rep.Aside != nil {
		q := keeperRequest("", "", 0, "")
		q.Why = "benchmark: the aside is not needed"
		if _, err := c.r.file().client.DiscardAside(ctx, rep.Aside.ID, q); err != nil {
			return fmt.Errorf("discard-aside %s: %w", rep.Aside.ID, err)
		}
	}
	return nil
}

// incrementalRounds measures snapshot-kept of the captured kept data (an
// incremental point) against the full points taken with capture off: each
// round appends 1 MiB and waits until the capture holds it and is current
// (not timed), then takes the point.
func (c *captureRun) incrementalRounds(ctx context.Context, full fullRun) error {
	sums, err := c.r.sumStreams(ctx, c.k.streams, false)
	if err != nil {
		return err
	}
	c.baseBytes = int64(sums[c.k.streams[0]].Bytes)
	c.sr.Rows = append(c.sr.Rows, ShapeRow{Op: fmt.Sprintf("`snapshot-kept` with capture on (an incremental point), %s appended and captured before each (round n: n × that after the base)", mib(float64(c.r.tailSize()))),
		Versus: "`snapshot-kept` of the same kept data with capture off (a full point, taken first)", Target: incrementalTarget})
	ri := len(c.sr.Rows) - 1
	for i := range c.r.cfg.Rounds {
		c.r.cfg.Log.Info("shape capture: incremental point", "round", i+1, "of", c.r.cfg.Rounds)
		if err := c.r.appendTail(ctx, c.k.streams[0], c.prefix, c.pay); err != nil {
			return err
		}
		// The capture holds the appended bytes, then a round after finds
		// nothing new: the capture is current, as it is between writes.
		for range 2 {
			if err := c.caughtUp(ctx, time.Now()); err != nil {
				return err
			}
		}
		s, rep, err := c.r.keeperVerb(ctx, c.sr.Shape+"-keeper-incremental", c.k, c.r.file().client.SnapshotKept)
		if err != nil {
			return fmt.Errorf("snapshot-kept of %s/%s, capture on, round %d: %w", c.k.module, c.k.local, i+1, err)
		}
		if rep.Point == nil || !rep.Point.Incremental {
			return fmt.Errorf("snapshot-kept of %s/%s with capture on did not take an incremental point (it said: %s)", c.k.module, c.k.local, oneLine(rep.Said))
		}
		p := &c.sr.Rows[ri].Pairs
		p.Keeper = append(p.Keeper, s)
		if i < len(full.samples) {
			p.Nats = append(p.Nats, full.samples[i])
		}
	}
	return nil
}
