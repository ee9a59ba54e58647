package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// start takes up the newest chain where its last segment ends, if it is
// young enough and the streams still continue it; else it takes a new
// base.
func (c *capturer) start(ctx context.Context) error {
	chains, err := c.k.listChains(ctx, c.rec.Module, c.rec.Local)
	if err != nil {
		return err
	}
	if n := len(chains); n > 0 && c.k.now().Sub(chains[n-1].baseTaken) < time.Duration(c.rec.Settings.BaseEvery) {
		ok, err := c.takeUp(ctx, chains[n-1])
		if err != nil || ok {
			return err
		}
	}
	return c.newBase(ctx)
}

// takeUp goes on with ch, listed, from its last segment (the one record
// of it read), if its streams continue it.
func (c *capturer) takeUp(ctx context.Context, ch *chain) (bool, error) {
	if len(ch.listed) == 0 {
		return false, nil
	}
	last, err := c.k.segmentOf(ctx, ch, len(ch.listed)-1)
	if err != nil {
		return false, err
	}
	base, err := c.k.readRecord(ctx, ch.base, false)
	if err != nil {
		return false, nil
	}
	var follows []*follow
	for _, s := range base.Streams {
		ss := last.stream(s.Name)
		if ss == nil {
			return false, nil
		}
		info, err := c.k.bus.Stream(ctx, s.Name)
		if errors.Is(err, ErrNoStream) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if info.Made != ss.Made || info.LastSeq < ss.To {
			return false, nil
		}
		follows = append(follows, &follow{name: s.Name, next: ss.To + 1, made: ss.Made, full: true})
	}
	if err := c.begin(ctx, ch, base, follows); err != nil {
		return false, err
	}
	c.n = last.N
	c.k.log.Info("took up the capture of a kept data", "kept", c.kept(), "chain", ch.rel, "after-segment", last.N)
	return true, nil
}

// newBase takes a full point, the base of a new chain, and goes on from it.
func (c *capturer) newBase(ctx context.Context) error {
	r := c.req
	r.Fingerprint = baseFingerprintPrefix + stamp(c.k.now())
	r.Why = "the base of the capture of " + c.kept()
	rep, err := c.k.SnapshotKept(ctx, r)
	if err != nil {
		return fmt.Errorf("taking a base: %w", err)
	}
	p := rep.Point
	var follows []*follow
	for _, s := range p.Streams {
		info, err := c.k.bus.Stream(ctx, s.Name)
		if err != nil {
			return fmt.Errorf("reading stream %s after its base: %w", s.Name, err)
		}
		follows = append(follows, &follow{name: s.Name, next: s.LastSeq + 1, made: info.Made, full: true})
	}
	ch := &chain{rel: chainRel(p.Module, p.Local, p.Form, p.Fingerprint), base: p.Dir, form: p.Form, baseFP: p.Fingerprint, baseTaken: p.Taken}
	if err := c.begin(ctx, ch, p, follows); err != nil {
		return err
	}
	c.n = 0
	c.k.log.Info("began a capture chain", "kept", c.kept(), "base", p.Dir)
	if err := c.expireChains(ctx); err != nil {
		c.k.log.Warn("the capture's chains past its window were not all removed; the next base tries again", "kept", c.kept(), "err", err)
	}
	return nil
}

// begin makes ch the chain the capture writes, reading its base's
// configurations.
func (c *capturer) begin(ctx context.Context, ch *chain, base *Point, follows []*follow) error {
	a, err := c.k.openArchive(ctx, base.Dir, base)
	if err != nil {
		return fmt.Errorf("opening the base %s: %w", base.Dir, err)
	}
	defer a.Close()
	cfg := map[string]json.RawMessage{}
	for _, f := range follows {
		meta, err := a.StreamMeta(f.name)
		if err != nil {
			return err
		}
		doc, err := readMeta(meta)
		if err != nil {
			return err
		}
		if cfg[f.name], _, err = configOf(doc); err != nil {
			return err
		}
		if d, err := c.k.bus.StreamDetail(ctx, f.name); err == nil {
			f.expect = liveBelow(d, f.next)
		}
	}
	_, rev, err := c.k.index.GetRev(ctx, captureMarkKey(c.rec.Module, c.rec.Local))
	switch {
	case errors.Is(err, ErrNotFound):
		rev = 0
	case err != nil:
		return fmt.Errorf("reading the capture's mark: %w", err)
	}
	c.chain, c.follows, c.config, c.sampled, c.cut, c.markRev, c.marked = ch, follows, cfg, nil, nil, rev, ch.baseTaken
	c.lastSample, c.lastSampleAt, c.sampling = nil, time.Time{}, nil // a sample under way is of the chain before
	return nil
}

// liveBelow counts the live messages of d below seq.
func liveBelow(d *StreamDetail, seq uint64) uint64 {
	if seq <= d.FirstSeq || d.Messages == 0 {
		return 0
	}
	to := min(seq-1, d.LastSeq)
	n := to - d.FirstSeq + 1
	i, _ := slices.BinarySearch(d.Deleted, to+1)
	return n - uint64(i)
}
