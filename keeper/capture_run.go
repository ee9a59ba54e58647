package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// errChainBroken: a stream of the kept data was made again, lost its tail
// or is gone (a restore ran, or someone deleted it); its chain cannot go
// on, and a new base begins the next.
var errChainBroken = errors.New("the kept data's streams no longer continue the chain")

// maxTrackedDeletes bounds the deleted sequences a capture keeps in memory
// per stream to tell new deletes from old ones. A stream with more is
// captured with its deletes recorded no further (logged): a restore to a
// moment then holds messages deleted after that.
const maxTrackedDeletes = 1 << 22

// captureCaller is who the capture's bases are taken for.
const captureCaller = "nats-keeper capture"

// captureRetryMax bounds the pause between failed rounds.
const captureRetryMax = 30 * time.Second

// RunCapture captures module/local while its record says on, ctx lives,
// and this keeper holds its capture lease. It returns ErrCaptureHeld at
// once when another keeper holds that lease, nil when capture was turned
// off, and ctx's error when it ends.
func (k *Keeper) RunCapture(ctx context.Context, module, local string) error {
	rec, err := k.captureRecord(ctx, module, local)
	if err != nil {
		return err
	}
	if !rec.On {
		return nil
	}
	r := Request{Module: module, Local: local, Form: rec.Form, Caller: captureCaller, Why: "capture of " + module + "/" + local}
	release, lost, err := k.takeLease(ctx, captureLeaseKey(module, local), VerbCapture, r)
	if errors.Is(err, ErrBusy) {
		return ErrCaptureHeld
	}
	if err != nil {
		return fmt.Errorf("taking the capture lease of %s/%s: %w", module, local, err)
	}
	defer release()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lost:
			cancel(errLeaseLost)
		case <-ctx.Done():
		}
	}()
	c := &capturer{k: k, rec: *rec, req: r}
	return c.run(ctx)
}

// capturer is one keeper's capture of one kept data.
type capturer struct {
	k   *Keeper
	rec CaptureRecord
	req Request

	chain   *chain
	n       uint64 // the last committed segment's number
	follows []*follow
	config  map[string]json.RawMessage // each stream's configuration, from the base
	sampled []byte                     // the last positions sample written
	pause   time.Duration
	markRev uint64    // the revision of the capture's mark this capture read or wrote last
	marked  time.Time // the mark's time
	cut     *segment  // the last committed segment, when it was cut at its bytes
	// The last positions sample committed, carried by a segment whose own
	// is slow (capture_sample.go), and that sample, when one is under way.
	lastSample   []Position
	lastSampleAt time.Time
	sampling     *sampleJob
	lastRead     uint64        // the bytes the last committed segment read
	lastTook     time.Duration // and how long its round took, its sample's wait aside
	yield        yielder       // how long a capture behind rests between rounds
}

// follow is where the capture of one stream stands.
type follow struct {
	name   string
	next   uint64 // the first sequence not captured yet
	made   int64  // when the stream was made
	expect uint64 // the live messages below next, as last counted
	known  []uint64
	full   bool // record every deleted sequence at the next round (a chain begun or taken up)
	capped bool // deletes are no longer tracked (maxTrackedDeletes)
}

func (c *capturer) run(ctx context.Context) error {
	for {
		if c.chain != nil && c.k.now().Sub(c.chain.baseTaken) >= time.Duration(c.rec.Settings.BaseEvery) {
			c.k.log.Info("the capture's base is older than base-every; a new base begins the next chain", "kept", c.kept(), "base", c.chain.base)
			c.chain = nil
		}
		if c.chain == nil {
			if err := c.start(ctx); err != nil {
				if err := c.wait(ctx, err); err != nil {
					return err
				}
				continue
			}
		}
		began := time.Now()
		more, err := c.round(ctx)
		if errors.Is(err, errCaptureLost) {
			c.k.log.Warn("another keeper took up the capture", "kept", c.kept())
			return ErrCaptureHeld
		}
		if errors.Is(err, errChainBroken) {
			c.k.log.Warn("a captured kept data no longer continues its chain; a new base begins the next", "kept", c.kept(), "err", err)
			c.chain = nil
			continue
		}
		if err != nil {
			if err := c.wait(ctx, err); err != nil {
				return err
			}
			continue
		}
		c.pause = 0
		// Rounds begin every segment-every, however long one took (a
		// message then waits at most that and one round to be held); a
		// segment cut at its bytes goes on at once, or after a rest when
		// the bus slowed its round (yielder).
		every := time.Duration(c.rec.Settings.SegmentEvery)
		wait := every - time.Since(began)
		if more {
			wait = c.yield.rest(c.lastTook, c.lastRead, every)
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(wait):
			}
		}
		rec, err := c.k.captureRecord(ctx, c.rec.Module, c.rec.Local)
		switch {
		case err == nil && !rec.On:
			c.k.log.Info("capture turned off", "kept", c.kept())
			return nil
		case err == nil:
			c.rec.Settings = rec.Settings
		}
	}
}

// wait logs err and pauses before the next try, longer each time.
func (c *capturer) wait(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	c.pause = min(max(2*c.pause, time.Second), captureRetryMax)
	c.k.log.Warn("a capture round failed; trying again", "kept", c.kept(), "in", c.pause, "err", err)
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(c.pause):
		return nil
	}
}

func (c *capturer) kept() string { return c.rec.Module + "/" + c.rec.Local }
