package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

// deltaStream is one stream a restore rolls back by the delta method: the
// point is a prefix of it, so only its tail (the messages after the
// point's last sequence) is set aside and deleted, and its configuration
// set back. The journal carries it, with the run's progress.
type deltaStream struct {
	Stream string `json:"stream"`
	// The point's state of the stream, which the stream holds again once
	// the tail is deleted (its last sequence stays the live one).
	PointFirst uint64 `json:"point-first"`
	PointLast  uint64 `json:"point-last"`
	PointMsgs  uint64 `json:"point-messages"`
	PointBytes uint64 `json:"point-bytes"`
	// The tail: the live messages TailFrom..TailTo (TailTo the live last
	// sequence when it was set aside), TailCount of them.
	TailFrom  uint64 `json:"tail-from"`
	TailTo    uint64 `json:"tail-to"`
	TailCount uint64 `json:"tail-messages"`
	// Config is the configuration a stream update sets back (the
	// point's, with the live placement and replicas); absent when it did
	// not change.
	Config json.RawMessage `json:"config,omitempty"`
	// The run's progress: the tail deleted, the configuration set back.
	Deleted   bool `json:"deleted,omitempty"`
	ConfigSet bool `json:"config-set,omitempty"`
}

// deleteCost is what one message delete costs, counted in bytes moved:
// one request and its reply, about as long as 16 KiB of a snapshot or a
// restore takes; fullCost is what a full restore of a stream costs beyond
// its bytes (its snapshot and restore requests, the stream removed and
// made again, its consumers with it), about 4 MiB's worth. They weigh a
// tail's deletes against a full restore.
const (
	deleteCost = 16 << 10
	fullCost   = 4 << 20
)

// planMethods decides, per stream of the point, the restore method (the
// request's, or auto's pick) and why, into the plan's changes; a delta or
// logical request that cannot be exact or cannot apply is refused here,
// before anything changes (ErrConflict: the request is well formed, but
// the kept data as it now stands does not allow it). A logical request is
// planLogical's. It reads the plan's live streams (pl.live). Streams that
// get delta leave the plan's Restore (nothing is restored of them) for its
// delta (pl.delta). It ends with planAround, which reads the methods.
func (k *Keeper) planMethods(ctx context.Context, r Request, pl *restorePlan) error {
	var err error
	if kept.MethodOf(r) != kept.MethodLogical {
		err = k.planExact(ctx, r, pl)
	} else {
		err = k.planLogical(ctx, r, pl)
	}
	if err != nil {
		return err
	}
	return k.planAround(ctx, r, pl)
}

// planExact is planMethods of every method but logical: full, delta, and
// auto's pick between them, per stream.
func (k *Keeper) planExact(ctx context.Context, r Request, pl *restorePlan) error {
	method := kept.MethodOf(r)
	if err := k.checkTails(ctx, pl); err != nil {
		return err
	}
	var cannot []string // why delta cannot roll each stream back, when asked for
	for _, sm := range pl.manifest.Streams {
		ch, ds, err := k.pickMethod(ctx, r, pl, &sm, containsStream(pl.live, sm.Name))
		if err != nil {
			return err
		}
		if method == kept.MethodDelta && ds == nil {
			cannot = append(cannot, fmt.Sprintf("stream %s: %s", sm.Name, strings.TrimPrefix(ch.Why, "full: ")))
		}
		pl.changes = append(pl.changes, ch)
		if ds != nil {
			pl.delta = append(pl.delta, *ds)
		}
	}
	if len(cannot) > 0 {
		return Errorf(ErrConflict, "method delta cannot roll back exactly %s", strings.Join(cannot, "; "))
	}
	pl.methodsSaid = methodsSaid(pl.changes)
	if len(pl.delta) > 0 {
		restore := []string{}
		for _, s := range pl.Restore {
			if pl.deltaOf(s) == nil {
				restore = append(restore, s)
			}
		}
		pl.Restore = restore
		pl.RestoreBytes = uint64(streamBytes(pl.manifest, restore))
	}
	return nil
}

// Putting back an aside that holds a delta's tail (restore-kept from
// aside/<id>, StreamSum.Base set): the tail alone is not the stream, so
// the stream is restored whole from its base point's messages followed by
// the tail's, composed into one archive as it is sent (composeTail), each
// message with its own sequence, time, subject, headers and data — the
// stream exactly as it was when the delta set its tail aside. It is a full
// restore of that stream: the live stream is set aside whole first, as
// any. The base point must still be the one the tail follows (its last
// sequence the tail's TailAfter) and verify whole before anything is
// removed; a base point an aside depends on is not pruned or discarded.
// The module's consumers on such a stream are made again from the aside's
// record once it is restored (planPositions), as the tail carries none.

// checkTails checks, before anything changes, that each tail the plan's
// source holds can be put back exactly: its base point is there, is the
// point the tail follows, and verifies whole.
func (k *Keeper) checkTails(ctx context.Context, pl *restorePlan) error {
	for _, st := range pl.point.Streams {
		if st.Base == "" {
			continue
		}
		base, err := k.loadSource(ctx, st.Base)
		if err != nil {
			return Errorf(ErrConflict, "%s holds only the tail of stream %s after sequence %s of point %s, and that point cannot be read (%v), so the stream cannot be put back exactly",
				pl.Point, st.Name, count(st.TailAfter), st.Base, err)
		}
		a, err := k.openArchive(ctx, st.Base, base)
		if err != nil {
			return fmt.Errorf("point %s, which the tail of stream %s follows, is damaged: %w", st.Base, st.Name, err)
		}
		_, _, err = k.verifyArchive(ctx, a)
		sm := a.Manifest().Stream(st.Name)
		a.Close()
		if err != nil {
			return fmt.Errorf("point %s, which the tail of stream %s follows, is damaged: %w", st.Base, st.Name, err)
		}
		if sm == nil || sm.Span().LastSeq != st.TailAfter || st.FirstSeq != st.TailAfter+1 {
			return Errorf(ErrConflict, "%s holds the tail of stream %s after sequence %s of point %s, but that point no longer ends there (it was taken again since), so the stream cannot be put back exactly",
				pl.Point, st.Name, count(st.TailAfter), st.Base)
		}
	}
	return nil
}

// pickMethod is the method of one stream of the point (sm; isLive: it is
// on the bus) and why, with, for delta, what the delta does.
func (k *Keeper) pickMethod(ctx context.Context, r Request, pl *restorePlan, sm *busarchive.StreamManifest, isLive bool) (kept.StreamChange, *deltaStream, error) {
	st := sm.Span() // a stream cut: up to the first message it left out
	kind, _ := streamKind(sm.Name, sm.Config.Subjects)
	ch := kept.StreamChange{Stream: sm.Name, Kind: kind,
		Then: &kept.SeqState{FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Messages: st.Msgs, Bytes: st.Bytes}}
	full := func(why string) (kept.StreamChange, *deltaStream, error) {
		ch.Method, ch.Why = kept.MethodFull, "full: "+why
		return ch, nil, nil
	}
	if tail := pl.tailOf(sm.Name); tail != nil {
		return full(fmt.Sprintf("%s holds only the stream's messages after sequence %s of point %s: it is put back whole, with that point's messages before them", pl.pointRel, count(tail.TailAfter), tail.Base))
	}
	if !isLive {
		return full("the stream is not live")
	}
	d, err := k.bus.StreamDetail(ctx, sm.Name)
	if errors.Is(err, ErrNoStream) {
		return full("the stream is not live")
	}
	if err != nil {
		// Full is exact whatever the stream holds: auto falls back to it.
		return full(fmt.Sprintf("the stream's details could not be read (%v)", err))
	}
	ch.Now = &kept.SeqState{FirstSeq: d.FirstSeq, LastSeq: d.LastSeq, Messages: d.Messages, Bytes: d.Bytes}
	pf := checkPrefix(sm, d)
	ch.Removed, ch.Config = pf.removed, pf.config
	if !pf.prefix {
		return full(pf.why)
	}
	ch.Appended = pf.tailCount
	if kept.MethodOf(r) == kept.MethodFull {
		return full("the request asks for it (the point is a prefix: delta would roll it back too)")
	}
	if pl.Overrides != nil {
		return full("the request sets replicas or placement, which only a full restore applies")
	}
	if st.Consumers > 0 && len(pl.point.Positions) == 0 {
		// A delta sets back only the positions the point records; the
		// consumers a stream's snapshot carries come back as they were
		// only with the stream.
		return full(fmt.Sprintf("the point records no consumer positions (an imported point, or none of the module's then) while its snapshot of the stream carries %d %s, which only a whole restore sets back as they were", st.Consumers, kept.Plural(st.Consumers, "consumer", "consumers")))
	}
	if k.autoFull && kept.MethodOf(r) == kept.MethodAuto {
		return full("auto picks full here (a test's keeper)")
	}
	if kept.MethodOf(r) == kept.MethodAuto {
		if cost, whole := pf.tailBytes+pf.tailCount*deleteCost, d.Bytes+st.Bytes+fullCost; cost >= whole {
			return full(fmt.Sprintf("the point is a prefix, but deleting the %s after it costs more than restoring the stream whole", messages(pf.tailCount)))
		}
	}
	if err := pf.confirm(ctx, pl.arch, sm); err != nil {
		return full(err.Error())
	}
	if !pf.prefix {
		ch.Appended = 0
		return full(pf.why)
	}
	ch.Method = kept.MethodDelta
	ch.Why = fmt.Sprintf("delta: the point is a prefix, %s after it", messages(pf.tailCount))
	if len(pf.config) > 0 {
		ch.Why += fmt.Sprintf("; its configuration is set back (%s)", strings.Join(pf.config, ", "))
	}
	return ch, &deltaStream{Stream: sm.Name, PointFirst: st.FirstSeq, PointLast: st.LastSeq, PointMsgs: st.Msgs, PointBytes: st.Bytes,
		TailFrom: pf.tailFrom, TailTo: pf.tailTo, TailCount: pf.tailCount, Config: pf.back}, nil
}

// methodsSaid is the sentence that names each stream's method and why,
// or "" when every stream gets full because none is live (a restore into
// absent data says nothing of methods).
func methodsSaid(cs []kept.StreamChange) string {
	var parts []string
	live := false
	for _, c := range cs {
		live = live || c.Now != nil
		parts = append(parts, c.Stream+" "+c.Why)
	}
	if !live {
		return ""
	}
	return " Methods: " + strings.Join(parts, "; ") + "."
}

// deltaOf is the plan's delta of stream s, or nil when s gets full.
func (pl *restorePlan) deltaOf(s string) *deltaStream {
	for i := range pl.delta {
		if pl.delta[i].Stream == s {
			return &pl.delta[i]
		}
	}
	return nil
}

// tailOf is the record of stream s in what the plan restores from when
// that is an aside holding only the stream's tail, or nil.
func (pl *restorePlan) tailOf(s string) *StreamSum {
	if pl.point == nil {
		return nil
	}
	for i := range pl.point.Streams {
		if st := &pl.point.Streams[i]; st.Name == s && st.Base != "" {
			return st
		}
	}
	return nil
}

// streamBytes is the bytes of the manifest's entries of streams.
func streamBytes(m *busarchive.Manifest, streams []string) int64 {
	var n int64
	for _, s := range m.Streams {
		if contains(streams, s.Name) {
			for _, e := range s.Entries {
				n += e.Size
			}
		}
	}
	return n
}
